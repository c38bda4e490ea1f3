// What the launcher checks before converting anything or starting a
// worker, so that a typo costs a second, not a 70B conversion and a model
// load: the checkpoint folder, the tokenizer against the checkpoint's
// vocabulary, the job's inputs (parsed and tokenized as the worker does,
// with the same messages), the output and log folders.

#ifndef LLAMA_LAUNCHER_PREFLIGHT_H_
#define LLAMA_LAUNCHER_PREFLIGHT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "worker/job_flags.h"

namespace llama {

// --<flag> (ckpt_dir, draft_ckpt_dir): exists and is a folder or a .gguf
// file.
absl::Status CheckCheckpointFolder(const std::string& ckpt_dir, std::string_view flag);

// The model a job runs, as far as it is known before converting.
struct PreflightModel {
  std::string ckpt_dir;
  int64_t vocab_size = 0;  // The checkpoint's (its embedding's rows).
  std::string tokenizer_path;
  int64_t context = 0;  // Its own context length (ModelConfig::context_length).
};

// The tokenizer loads and has the model's vocabulary; the job's prompt or
// prompts/dialogs file parses; the output file's folder exists and is
// writable. Each prompt or dialog is encoded as the worker will: one too
// long for --max_seq_len (the model's context without it), or a dialog whose roles break the chat format,
// gets an error record when the job runs (the others run), so it is a
// warning here, and an error when nothing could run. `warnings` also says
// when --max_seq_len caps --max_gen_len.
absl::Status CheckJobInputs(const PreflightModel& model, const JobFlags& flags, std::vector<std::string>* warnings);

// --draft_ckpt_dir's model against the job's: the same vocabulary size and,
// where the draft has a tokenizer file (draft.tokenizer_path not empty),
// the model's tokenizer token for token (CheckSameVocabulary); errors name
// the flag. Without a tokenizer file only the size can be checked, and
// `warnings` says so.
absl::Status CheckDraftModel(const PreflightModel& model, const PreflightModel& draft,
                             std::vector<std::string>* warnings);

// --log_dir: made if missing, and the ranks' logs can be created in it.
absl::Status CheckLogFolder(const std::string& log_dir);

}  // namespace llama

#endif  // LLAMA_LAUNCHER_PREFLIGHT_H_
