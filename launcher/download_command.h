// `launcher download`: download.sh's job, with the download flags
// (--models, --target_dir, --url, --url_file, --connections). The launcher
// also runs it before a job when given --models and no --ckpt_dir.

#ifndef LLAMA_LAUNCHER_DOWNLOAD_COMMAND_H_
#define LLAMA_LAUNCHER_DOWNLOAD_COMMAND_H_

#include <gflags/gflags.h>

#include "absl/status/status.h"

DECLARE_string(models);
DECLARE_string(target_dir);

namespace llama {

// Fetches and verifies the models into --target_dir; prints one summary line.
absl::Status RunDownloadCommand();

}  // namespace llama

#endif  // LLAMA_LAUNCHER_DOWNLOAD_COMMAND_H_
