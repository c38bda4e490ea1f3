#include "launcher/preflight.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/durable_file.h"
#include "base/status_macros.h"
#include "tokenizer/chat_format.h"
#include "tokenizer/tokenizer.h"
#include "worker/job.h"

namespace llama {
namespace {

namespace fs = std::filesystem;

// Problems listed in one message; the rest are counted.
constexpr size_t kProblemsShown = 3;

absl::Status CheckVocabulary(const PreflightModel& model, const Tokenizer& tokenizer) {
  if (tokenizer.vocab_size() == model.vocab_size) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrFormat(
      "the tokenizer %s has %d tokens but the model in %s has a vocabulary of %d; use the checkpoint's own "
      "tokenizer (--tokenizer_path)",
      model.tokenizer_path, tokenizer.vocab_size(), model.ckpt_dir, model.vocab_size));
}

// Why each of the job's prompts or dialogs cannot run, as the worker's
// generator would find once the model is loaded: too long (it counts the
// tokens with BOS, and the chat format's markers), or roles out of order.
absl::StatusOr<std::vector<std::string>> UnrunnableInputs(const Tokenizer& tokenizer, const Job& job,
                                                          const std::string& context_name, int64_t context) {
  std::vector<std::string> problems;
  const auto check_length = [&](const char* what, size_t index, size_t tokens) {
    if (tokens > static_cast<size_t>(context)) {
      problems.push_back(absl::StrFormat("%s %d has %d tokens, more than %s", what, index, tokens, context_name));
    }
  };
  for (size_t i = 0; i < job.prompts.size(); ++i) {
    ASSIGN_OR_RETURN(const std::vector<int> ids, tokenizer.Encode(job.prompts[i], /*bos=*/true, /*eos=*/false));
    check_length("prompt", i, ids.size());
  }
  for (size_t i = 0; i < job.dialogs.size(); ++i) {
    const absl::StatusOr<ChatPrompt> prompt = EncodeDialog(tokenizer, job.dialogs[i]);
    if (!prompt.ok()) {
      problems.push_back(absl::StrCat("dialog ", i, ": ", prompt.status().message()));
      continue;
    }
    check_length("dialog", i, prompt->tokens.size());
  }
  return problems;
}

// The flag that gave the job's inputs, for messages.
std::string InputSource(const JobFlags& flags) {
  if (!flags.prompt.empty()) return "--prompt";
  return !flags.prompts_file.empty() ? absl::StrCat("--prompts_file ", flags.prompts_file)
                                     : absl::StrCat("--dialogs_file ", flags.dialogs_file);
}

// An error when nothing of the job can run; otherwise a warning per input
// that cannot (the first few).
// The longest sequence: --max_seq_len, or the model's own context.
int64_t Context(const JobFlags& flags, int64_t model_context) {
  return flags.max_seq_len > 0 ? flags.max_seq_len : model_context;
}
std::string ContextName(const JobFlags& flags, int64_t model_context) {
  return flags.max_seq_len > 0 ? absl::StrFormat("--max_seq_len=%d", flags.max_seq_len)
                               : absl::StrFormat("the model's context of %d (--max_seq_len=0)", model_context);
}

absl::Status CheckInputsRun(const Tokenizer& tokenizer, const Job& job, const JobFlags& flags, int64_t context,
                            std::vector<std::string>* warnings) {
  ASSIGN_OR_RETURN(const std::vector<std::string> problems,
                   UnrunnableInputs(tokenizer, job, ContextName(flags, context), Context(flags, context)));
  if (problems.empty()) return absl::OkStatus();
  const size_t inputs = job.prompts.size() + job.dialogs.size();
  const size_t shown = std::min(problems.size(), kProblemsShown);
  const std::string more =
      problems.size() > shown ? absl::StrFormat(" (and %d more)", problems.size() - shown) : std::string();
  if (problems.size() == inputs) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: nothing can run: %s%s", InputSource(flags),
        absl::StrJoin(problems.begin(), problems.begin() + shown, "; "), more));
  }
  for (size_t i = 0; i < shown; ++i) {
    warnings->push_back(absl::StrFormat("%s: %s; it gets an error record, the others run", InputSource(flags),
                                        problems[i]));
  }
  if (!more.empty()) {
    warnings->push_back(absl::StrFormat("%s: %d more cannot run", InputSource(flags), problems.size() - shown));
  }
  return absl::OkStatus();
}

absl::Status CheckOutputFolder(const std::string& output) {
  const fs::path folder = fs::absolute(output).parent_path();
  std::error_code error;
  if (!fs::is_directory(folder, error)) {
    return absl::NotFoundError(
        absl::StrFormat("--output \"%s\": the folder %s does not exist", output, folder.string()));
  }
  if (access(folder.c_str(), W_OK) != 0) {
    return absl::PermissionDeniedError(
        absl::StrFormat("--output \"%s\": the folder %s is not writable", output, folder.string()));
  }
  if (fs::exists(output, error) && !fs::is_regular_file(output, error)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--output \"%s\" is not a file (a folder?): expected a JSON Lines file", output));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckCheckpointFolder(const std::string& ckpt_dir, std::string_view flag) {
  std::error_code error;
  if (!fs::exists(ckpt_dir, error)) {
    return absl::NotFoundError(absl::StrFormat("--%s \"%s\" does not exist", flag, ckpt_dir));
  }
  if (!fs::is_directory(ckpt_dir, error) && !absl::EndsWith(ckpt_dir, ".gguf")) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--%s \"%s\" is a file; expected the folder holding consolidated.NN.pth and params.json (or a "
        "Hugging Face folder: config.json and model*.safetensors), or a .gguf file", flag, ckpt_dir));
  }
  return absl::OkStatus();
}

absl::Status CheckDraftModel(const PreflightModel& model, const PreflightModel& draft,
                             std::vector<std::string>* warnings) {
  if (draft.vocab_size != model.vocab_size) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "--draft_ckpt_dir=%s: the draft's vocabulary has %d tokens, the model's %d; a draft must speak the "
        "model's tokenizer",
        draft.ckpt_dir, draft.vocab_size, model.vocab_size));
  }
  if (draft.tokenizer_path.empty()) {
    warnings->push_back(absl::StrFormat(
        "--draft_ckpt_dir=%s has no tokenizer file; only its vocabulary's size (%d) was checked against the "
        "model's",
        draft.ckpt_dir, draft.vocab_size));
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const std::unique_ptr<Tokenizer> ours, Tokenizer::Load(model.tokenizer_path));
  absl::StatusOr<std::unique_ptr<Tokenizer>> theirs = Tokenizer::Load(draft.tokenizer_path);
  if (!theirs.ok()) {
    return absl::Status(theirs.status().code(),
                        absl::StrCat("--draft_ckpt_dir=", draft.ckpt_dir, ": ", theirs.status().message()));
  }
  if (absl::Status same = CheckSameVocabulary(*ours, **theirs); !same.ok()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "--draft_ckpt_dir=%s: its tokenizer %s is not the model's (%s): %s; a draft must speak the model's "
        "tokenizer",
        draft.ckpt_dir, draft.tokenizer_path, model.tokenizer_path, same.message()));
  }
  return absl::OkStatus();
}

absl::Status CheckJobInputs(const PreflightModel& model, const JobFlags& flags, std::vector<std::string>* warnings) {
  ASSIGN_OR_RETURN(const std::unique_ptr<Tokenizer> tokenizer, Tokenizer::Load(model.tokenizer_path));
  RETURN_IF_ERROR(CheckVocabulary(model, *tokenizer));
  // The worker's own reading, so the messages (file, line, element) are its;
  // a server has no job (its prompts come over HTTP).
  if (!flags.serve) {
    ASSIGN_OR_RETURN(const Job job, ReadJob(flags.prompt, flags.prompts_file, flags.dialogs_file));
    RETURN_IF_ERROR(CheckInputsRun(*tokenizer, job, flags, model.context, warnings));
  }
  if (!flags.json_schema.empty()) {
    if (flags.serve) {
      return absl::InvalidArgumentError(
          "--json_schema constrains a batch job's answers; a server takes a schema per request (response_format)");
    }
    RETURN_IF_ERROR(ReadJsonSchemaGrammar(flags.json_schema).status());
  }
  if (!flags.output.empty()) RETURN_IF_ERROR(CheckOutputFolder(flags.output));
  if (flags.max_gen_len >= Context(flags, model.context)) {
    warnings->push_back(absl::StrFormat(
        "--max_gen_len=%d is at least %s: each completion stops at max_seq_len tokens, prompt included (as the "
        "reference caps it)",
        flags.max_gen_len, ContextName(flags, model.context)));
  }
  return absl::OkStatus();
}

absl::Status CheckLogFolder(const std::string& log_dir) { return Annotate(ProbeWritableFolder(log_dir), "--log_dir"); }

}  // namespace llama
