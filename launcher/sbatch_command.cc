#include "launcher/sbatch_command.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gflags/gflags.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "launcher/slurm.h"

DEFINE_int32(nodes, 1, "sbatch: nodes to allocate.");
DEFINE_int32(gpus_per_node, 1, "sbatch: GPUs (and workers) per node.");
DEFINE_string(partition, "", "sbatch: partition.");
DEFINE_string(time, "", "sbatch: time limit.");
DEFINE_string(account, "", "sbatch: account.");
DEFINE_bool(dry_run, false, "sbatch: print the script, do not submit it.");

namespace llama {

namespace fs = std::filesystem;

absl::Status RunSbatchCommand(const std::string& launcher_path, const std::vector<std::string>& job_args) {
  SbatchOptions options;
  options.nodes = FLAGS_nodes;
  options.gpus_per_node = FLAGS_gpus_per_node;
  options.partition = FLAGS_partition;
  options.time = FLAGS_time;
  options.account = FLAGS_account;
  if (options.nodes < 1 || options.gpus_per_node < 1) {
    return absl::InvalidArgumentError("sbatch: --nodes and --gpus_per_node must be >= 1");
  }
  const std::string script = SbatchScript(options, launcher_path, job_args);
  std::printf("%s", script.c_str());
  std::fflush(stdout);
  if (FLAGS_dry_run) return absl::OkStatus();
  const std::string path = absl::StrCat(fs::temp_directory_path().string(), "/llama2-sbatch-", getpid(), ".sh");
  std::ofstream(path) << script;
  // Found on PATH, as a user would run it.
  const std::string command = absl::StrCat("sbatch ", path);
  const int status = std::system(command.c_str());
  if (status != 0) {
    return absl::UnavailableError(
        absl::StrFormat("`%s` failed (status %d); is SLURM's sbatch on PATH?", command, status));
  }
  return absl::OkStatus();
}

}  // namespace llama
