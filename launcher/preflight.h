// What the launcher checks before converting anything or starting a
// worker, so that a typo costs a second, not a 70B conversion and a model
// load: the checkpoint folder, the tokenizer, the job's inputs (parsed as
// the worker parses them, with the same messages) and the output folder.

#ifndef LLAMA_LAUNCHER_PREFLIGHT_H_
#define LLAMA_LAUNCHER_PREFLIGHT_H_

#include <string>

#include "absl/status/status.h"
#include "worker/job_flags.h"

namespace llama {

// --ckpt_dir: exists and is a folder.
absl::Status CheckCheckpointFolder(const std::string& ckpt_dir);

// The tokenizer loads; the job's prompt or prompts/dialogs file parses; the
// output file's folder exists and is writable; and a warning (returned as a
// message, empty when none) when --max_seq_len caps --max_gen_len.
absl::Status CheckJobInputs(const std::string& tokenizer_path, const JobFlags& flags, std::string* warning);

}  // namespace llama

#endif  // LLAMA_LAUNCHER_PREFLIGHT_H_
