// //tools:tokenize: shows how Llama 2's tokenizer and chat format see text.
//
//   tokenize --tokenizer_path=tokenizer.model --prompt="Hello world"
//   tokenize --tokenizer_path=tokenizer.model --dialogs_file=dialogs.json
//   tokenize --tokenizer_path=tokenizer.model --ids=1,15043,3186
//
// For text: one line per token (id, piece text as decoded alone). For
// dialogs: the chat prompt's ids as the reference's chat_completion builds
// them, then its decoded text. For ids: the decoded text.

#include <cstdio>
#include <string>
#include <vector>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tokenizer/chat_format.h"
#include "tokenizer/prompt_files.h"
#include "tokenizer/tokenizer.h"

DEFINE_string(tokenizer_path, "", "Path to Llama 2's tokenizer.model. Required.");
DEFINE_string(prompt, "", "Text to encode (with BOS, as text_completion does).");
DEFINE_string(prompts_file, "", "Prompts to encode: JSON array of strings or JSON Lines.");
DEFINE_string(dialogs_file, "", "Dialogs to encode with the Llama 2 chat format (JSON).");
DEFINE_string(ids, "", "Comma-separated token ids to decode.");

namespace {

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "tokenize: %s\n", std::string(status.message()).c_str());
  return 1;
}

absl::Status PrintTokens(const llama::Tokenizer& tokenizer, const std::vector<int>& ids) {
  for (int id : ids) {
    absl::StatusOr<std::string> text = tokenizer.Decode({id});
    if (!text.ok()) return text.status();
    std::printf("%6d  \"%s\"\n", id, absl::CEscape(*text).c_str());
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage("Encodes prompts or dialogs, or decodes ids, with a Llama 2 tokenizer.");
  gflags::ParseCommandLineFlags(&argc, &argv, /*remove_flags=*/true);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;

  const int modes = !FLAGS_prompt.empty() + !FLAGS_prompts_file.empty() +
                    !FLAGS_dialogs_file.empty() + !FLAGS_ids.empty();
  if (FLAGS_tokenizer_path.empty() || modes != 1) {
    return Fail(absl::InvalidArgumentError(
        "expected --tokenizer_path and exactly one of --prompt, --prompts_file, --dialogs_file, "
        "--ids (see --help)"));
  }
  absl::StatusOr<std::unique_ptr<llama::Tokenizer>> tokenizer =
      llama::Tokenizer::Load(FLAGS_tokenizer_path);
  if (!tokenizer.ok()) return Fail(tokenizer.status());

  if (!FLAGS_ids.empty()) {
    std::vector<int> ids;
    for (absl::string_view part : absl::StrSplit(FLAGS_ids, ',')) {
      int id;
      if (!absl::SimpleAtoi(part, &id)) {
        return Fail(absl::InvalidArgumentError(
            absl::StrCat("--ids: \"", part, "\" is not an integer")));
      }
      ids.push_back(id);
    }
    absl::StatusOr<std::string> text = (*tokenizer)->Decode(ids);
    if (!text.ok()) return Fail(text.status());
    std::printf("%s\n", text->c_str());
    return 0;
  }

  if (!FLAGS_dialogs_file.empty()) {
    absl::StatusOr<std::vector<llama::Dialog>> dialogs = llama::ReadDialogsFile(FLAGS_dialogs_file);
    if (!dialogs.ok()) return Fail(dialogs.status());
    for (size_t i = 0; i < dialogs->size(); ++i) {
      absl::StatusOr<llama::ChatPrompt> prompt = llama::EncodeDialog(**tokenizer, (*dialogs)[i]);
      if (!prompt.ok()) {
        return Fail(absl::InvalidArgumentError(
            absl::StrCat(FLAGS_dialogs_file, ": dialog ", i, ": ", prompt.status().message())));
      }
      absl::StatusOr<std::string> text = (*tokenizer)->Decode(prompt->tokens);
      if (!text.ok()) return Fail(text.status());
      std::printf("dialog %zu: %zu tokens%s\n  ids: [%s]\n  text: \"%s\"\n", i,
                  prompt->tokens.size(), prompt->unsafe ? " (contains special tags: refused)" : "",
                  absl::StrJoin(prompt->tokens, ", ").c_str(), absl::CEscape(*text).c_str());
    }
    return 0;
  }

  std::vector<std::string> prompts = {FLAGS_prompt};
  if (!FLAGS_prompts_file.empty()) {
    absl::StatusOr<std::vector<std::string>> read = llama::ReadPromptsFile(FLAGS_prompts_file);
    if (!read.ok()) return Fail(read.status());
    prompts = *std::move(read);
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    absl::StatusOr<std::vector<int>> ids = (*tokenizer)->Encode(prompts[i], true, false);
    if (!ids.ok()) return Fail(ids.status());
    std::printf("prompt %zu: %zu tokens\n", i, ids->size());
    if (absl::Status status = PrintTokens(**tokenizer, *ids); !status.ok()) return Fail(status);
  }
  return 0;
}
