// `launcher sbatch`: writes (and submits) a SLURM batch script that runs
// this launcher on every allocated node with the job's arguments, with the
// sbatch flags (--nodes, --nproc_per_node, --gpus_per_node, --partition,
// --time, --account, --sbatch_arg, --dry_run).

#ifndef LLAMA_LAUNCHER_SBATCH_COMMAND_H_
#define LLAMA_LAUNCHER_SBATCH_COMMAND_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace llama {

// What a job asks of each node.
struct SubmittedJob {
  bool serve = false;
  int nodes = 1;
  int workers_per_node = 1;
  int gpus_per_node = 0;
  bool dry_run = false;  // The script may be for another machine's paths.
};

struct SbatchRequest {
  std::vector<std::string> job_args;       // After "--".
  std::vector<std::string> worker_env;     // Every --worker_env, for the job's launchers.
  std::vector<std::string> sbatch_options;  // Every --sbatch_arg.
  // Checks the job as its nodes would, once its flags are applied to this
  // process.
  std::function<absl::Status(const SubmittedJob&)> check_job = nullptr;
};

// `launcher_path` is the binary the script runs (unless --launcher_path);
// the job's arguments follow it. Prints the script, then (submitted) the
// job id alone on the last line of stdout.
absl::Status RunSbatchCommand(const std::string& launcher_path, const SbatchRequest& request);

}  // namespace llama

#endif  // LLAMA_LAUNCHER_SBATCH_COMMAND_H_
