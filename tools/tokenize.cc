// //tools:tokenize: shows how Llama 2's tokenizer and chat format see text.
//
//   tokenize --tokenizer_path=tokenizer.model --prompt="Hello world"
//   tokenize --tokenizer_path=tokenizer.model --dialogs_file=dialogs.json
//   tokenize --tokenizer_path=tokenizer.model --ids=1,15043,3186
//
// For text: one line per token (id, the vocabulary entry, its text decoded
// alone). For dialogs: the chat prompt's ids as the reference's
// chat_completion builds them, then its decoded text, or why the chat
// format refuses it. For ids: the decoded text.

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <gflags/gflags.h>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "tokenizer/chat_format.h"
#include "tokenizer/tokenizer.h"
#include "tools/tool_main.h"
#include "worker/job_flags.h"
#include "worker/prompt_files.h"

// --tokenizer_path, --prompt, --prompts_file and --dialogs_file are the
// job's flags (worker/job_flags.h): the prompt is encoded with BOS, as
// text_completion does; dialogs with the Llama 2 chat format.
DEFINE_string(ids, "", "Comma-separated token ids to decode.");

namespace {

// The vocabulary entry as the model holds it (SentencePiece's U+2581 for a
// space, so "▁Hello" and "Hello" differ; tiktoken's bytes, escaped), then
// the token's text decoded alone.
absl::Status PrintTokens(const llama::Tokenizer& tokenizer, const std::vector<int>& ids) {
  for (int id : ids) {
    ASSIGN_OR_RETURN(std::string text, tokenizer.Decode({id}));
    const std::string piece = tokenizer.family() == llama::Tokenizer::Family::kTiktoken
                                  ? absl::CHexEscape(tokenizer.TokenBytes(id))
                                  : tokenizer.GetPiece(id).text;
    // Padded by characters, not bytes.
    const int width = static_cast<int>(
        std::count_if(piece.begin(), piece.end(), [](char c) { return (c & 0xC0) != 0x80; }));
    std::printf("%6d  %s%*s \"%s\"\n", id, piece.c_str(), std::max(0, 16 - width), "",
                absl::Utf8SafeCEscape(text).c_str());
  }
  return absl::OkStatus();
}

absl::Status Tokenize() {
  const int modes = !FLAGS_prompt.empty() + !FLAGS_prompts_file.empty() +
                    !FLAGS_dialogs_file.empty() + !FLAGS_ids.empty();
  if (FLAGS_tokenizer_path.empty() || modes != 1) {
    return absl::InvalidArgumentError(
        "expected --tokenizer_path and exactly one of --prompt, --prompts_file, --dialogs_file, "
        "--ids (see --help)");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<llama::Tokenizer> tokenizer, llama::Tokenizer::Load(FLAGS_tokenizer_path));

  if (!FLAGS_ids.empty()) {
    std::vector<int> ids;
    for (absl::string_view part : absl::StrSplit(FLAGS_ids, ',')) {
      int id;
      if (!absl::SimpleAtoi(part, &id)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--ids: \"", part, "\" is not an integer"));
      }
      ids.push_back(id);
    }
    ASSIGN_OR_RETURN(const std::string text, tokenizer->Decode(ids));
    std::printf("%s\n", text.c_str());
    return absl::OkStatus();
  }

  if (!FLAGS_dialogs_file.empty()) {
    ASSIGN_OR_RETURN(std::vector<llama::Dialog> dialogs, llama::ReadDialogsFile(FLAGS_dialogs_file));
    for (size_t i = 0; i < dialogs.size(); ++i) {
      absl::StatusOr<llama::ChatPrompt> prompt = llama::EncodeDialog(*tokenizer, dialogs[i]);
      // What the chat format does with this dialog is the answer, a refusal
      // too (as a batch job gives it an error record); the others follow.
      if (!prompt.ok()) {
        std::printf("dialog %zu: refused: %s\n", i, std::string(prompt.status().message()).c_str());
        continue;
      }
      ASSIGN_OR_RETURN(std::string text, tokenizer->Decode(prompt->tokens));
      std::printf("dialog %zu: %zu tokens%s\n  ids: [%s]\n  text: \"%s\"\n", i,
                  prompt->tokens.size(), prompt->unsafe ? " (contains special tags: refused)" : "",
                  absl::StrJoin(prompt->tokens, ", ").c_str(), absl::CEscape(text).c_str());
    }
    return absl::OkStatus();
  }

  std::vector<std::string> prompts = {FLAGS_prompt};
  if (!FLAGS_prompts_file.empty()) {
    ASSIGN_OR_RETURN(prompts, llama::ReadPromptsFile(FLAGS_prompts_file));
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSIGN_OR_RETURN(std::vector<int> ids, tokenizer->Encode(prompts[i], true, false));
    std::printf("prompt %zu: %zu tokens\n", i, ids.size());
    RETURN_IF_ERROR(PrintTokens(*tokenizer, ids));
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  return llama::ToolMain(argc, argv, "tokenize", "Encodes prompts or dialogs, or decodes ids, with a Llama 2 tokenizer.",
                         [](const std::vector<std::string>&) { return Tokenize(); },
                         {"tokenizer_path", "prompt", "prompts_file", "dialogs_file"});
}
