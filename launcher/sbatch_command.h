// `launcher sbatch`: writes (and submits) a SLURM batch script that runs
// this launcher on every allocated node with the job's arguments, with the
// sbatch flags (--nodes, --nproc_per_node, --gpus_per_node, --partition,
// --time, --account, --sbatch_arg, --dry_run).

#ifndef LLAMA_LAUNCHER_SBATCH_COMMAND_H_
#define LLAMA_LAUNCHER_SBATCH_COMMAND_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace llama {

struct SbatchRequest {
  std::vector<std::string> job_args;       // After "--".
  std::vector<std::string> worker_env;     // Every --worker_env, for the job's launchers.
  std::vector<std::string> sbatch_options;  // Every --sbatch_arg.
};

// `launcher_path` is the binary the script runs (unless --launcher_path);
// the job's arguments follow it. Prints the script, then (submitted) the
// job id alone on the last line of stdout.
absl::Status RunSbatchCommand(const std::string& launcher_path, const SbatchRequest& request);

}  // namespace llama

#endif  // LLAMA_LAUNCHER_SBATCH_COMMAND_H_
