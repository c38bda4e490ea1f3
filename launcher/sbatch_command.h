// `launcher sbatch`: writes (and submits) a SLURM batch script that runs
// this launcher on every allocated node with the job's arguments, with the
// sbatch flags (--nodes, --gpus_per_node, --partition, --time, --account,
// --dry_run).

#ifndef LLAMA_LAUNCHER_SBATCH_COMMAND_H_
#define LLAMA_LAUNCHER_SBATCH_COMMAND_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace llama {

// `launcher_path` is the binary the script runs; `job_args` follow it.
absl::Status RunSbatchCommand(const std::string& launcher_path, const std::vector<std::string>& job_args);

}  // namespace llama

#endif  // LLAMA_LAUNCHER_SBATCH_COMMAND_H_
