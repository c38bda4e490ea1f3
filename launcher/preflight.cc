#include "launcher/preflight.h"

#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "tokenizer/tokenizer.h"
#include "worker/job.h"

namespace llama {

namespace fs = std::filesystem;

absl::Status CheckCheckpointFolder(const std::string& ckpt_dir) {
  std::error_code error;
  if (!fs::exists(ckpt_dir, error)) {
    return absl::NotFoundError(absl::StrFormat("--ckpt_dir \"%s\" does not exist", ckpt_dir));
  }
  if (!fs::is_directory(ckpt_dir, error)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--ckpt_dir \"%s\" is a file; expected the folder holding consolidated.NN.pth and params.json (or a "
        "Hugging Face folder: config.json and model*.safetensors)", ckpt_dir));
  }
  return absl::OkStatus();
}

absl::Status CheckJobInputs(const std::string& tokenizer_path, const JobFlags& flags, std::string* warning) {
  RETURN_IF_ERROR(Tokenizer::Load(tokenizer_path).status());
  // The worker's own reading, so the messages (file, line, element) are its;
  // a server has no job (its prompts come over HTTP).
  if (!flags.serve) RETURN_IF_ERROR(ReadJob(flags.prompt, flags.prompts_file, flags.dialogs_file).status());
  if (!flags.json_schema.empty()) {
    if (flags.serve) {
      return absl::InvalidArgumentError(
          "--json_schema constrains a batch job's answers; a server takes a schema per request (response_format)");
    }
    RETURN_IF_ERROR(ReadJsonSchemaGrammar(flags.json_schema).status());
  }
  if (!flags.output.empty()) {
    const fs::path folder = fs::absolute(flags.output).parent_path();
    std::error_code error;
    if (!fs::is_directory(folder, error)) {
      return absl::NotFoundError(
          absl::StrFormat("--output \"%s\": the folder %s does not exist", flags.output, folder.string()));
    }
    if (access(folder.c_str(), W_OK) != 0) {
      return absl::PermissionDeniedError(
          absl::StrFormat("--output \"%s\": the folder %s is not writable", flags.output, folder.string()));
    }
  }
  warning->clear();
  if (flags.max_gen_len >= flags.max_seq_len) {
    *warning = absl::StrFormat(
        "--max_gen_len=%d is at least --max_seq_len=%d: each completion stops at max_seq_len tokens, prompt "
        "included (as the reference caps it)",
        flags.max_gen_len, flags.max_seq_len);
  }
  return absl::OkStatus();
}

}  // namespace llama
