#include "launcher/sbatch_command.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>

#include <gflags/gflags.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "launcher/slurm.h"
#include "worker/job_flags.h"

DEFINE_int32(nodes, 1, "sbatch: nodes to allocate.");
DEFINE_int32(gpus_per_node, 1, "sbatch: GPUs (and workers) per node.");
DEFINE_string(partition, "", "sbatch: partition.");
DEFINE_string(time, "", "sbatch: time limit.");
DEFINE_string(account, "", "sbatch: account.");
DEFINE_bool(dry_run, false, "sbatch: print the script, do not submit it.");
DEFINE_string(launcher_path, "",
              "sbatch: the launcher binary the compute nodes run, on storage they see (with the worker binary next "
              "to it). Required when this launcher runs from Bazel's output tree.");

namespace llama {
namespace {

namespace fs = std::filesystem;

// The files whose flags a job takes: the job's and the launcher's own.
bool IsJobFlagFile(const std::string& file) {
  return absl::EndsWith(file, "worker/job_flags.cc") || absl::EndsWith(file, "launcher/launcher_flags.cc");
}

// Flags SLURM's placement decides; given to sbatch they would fight it.
const std::set<std::string>& PlacementFlags() {
  static const std::set<std::string> flags = {"nnodes", "nproc_per_node", "node_rank", "master_addr"};
  return flags;
}

// `args` (given after "--") applied to this process's flags, so that they
// are checked as the job's, then every job flag that differs from its
// default, as the script's arguments.
absl::StatusOr<std::vector<std::string>> JobArguments(const std::vector<std::string>& args) {
  bool serve = false;
  for (const std::string& arg : args) {
    if (arg == "serve") {  // A server job: `launcher serve ...` on every node.
      serve = true;
      continue;
    }
    if (!absl::StartsWith(arg, "--")) {
      return absl::InvalidArgumentError(absl::StrFormat("sbatch: unexpected argument \"%s\"", arg));
    }
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    gflags::CommandLineFlagInfo info;
    if (!gflags::GetCommandLineFlagInfo(name.c_str(), &info) || !IsJobFlagFile(info.filename)) {
      return absl::InvalidArgumentError(absl::StrFormat("sbatch: unknown job flag --%s (see --help)", name));
    }
    const std::string value = eq == std::string::npos ? (info.type == "bool" ? "true" : "") : arg.substr(eq + 1);
    if (gflags::SetCommandLineOption(name.c_str(), value.c_str()).empty()) {
      return absl::InvalidArgumentError(absl::StrFormat("sbatch: --%s=%s: not a valid %s", name, value, info.type));
    }
  }
  std::vector<gflags::CommandLineFlagInfo> all;
  gflags::GetAllFlags(&all);
  std::vector<std::string> job;
  if (serve) job.push_back("serve");
  for (const gflags::CommandLineFlagInfo& flag : all) {
    if (flag.is_default || !IsJobFlagFile(flag.filename)) continue;
    if (flag.name == "api_key") {
      return absl::InvalidArgumentError(
          "sbatch: --api_key would be written into the batch script: put the key in a file on shared storage and "
          "pass --api_key_file");
    }
    if (PlacementFlags().count(flag.name) > 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "sbatch: --%s is decided by SLURM: use --nodes and --gpus_per_node (one worker per GPU)", flag.name));
    }
    job.push_back(absl::StrCat("--", flag.name, "=", flag.current_value));
  }
  RETURN_IF_ERROR(CheckJobFlags(JobFlagsFromCommandLine(), /*need_input=*/false));
  return job;
}

// A path under Bazel's output tree: gone or replaced by the next build, and
// often not on storage the compute nodes see.
bool InBazelOutput(const std::string& path) {
  return absl::StrContains(path, "/.cache/bazel/") || absl::StrContains(path, "/bazel-out/") ||
         absl::StrContains(path, "/execroot/");
}

}  // namespace

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
  const std::string launcher = FLAGS_launcher_path.empty() ? launcher_path : FLAGS_launcher_path;
  if (FLAGS_launcher_path.empty() && InBazelOutput(launcher)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "sbatch: this launcher runs from Bazel's output tree (%s), which compute nodes may not see and the next "
        "build replaces; copy bazel-bin/launcher/launcher and bazel-bin/worker/worker into one folder on shared "
        "storage and pass --launcher_path=<that folder>/launcher",
        launcher));
  }
  ASSIGN_OR_RETURN(const std::vector<std::string> job, JobArguments(job_args));
  const std::string script = SbatchScript(options, launcher, job);
  std::printf("%s", script.c_str());
  std::fflush(stdout);
  if (FLAGS_dry_run) return absl::OkStatus();

  // A private file (mkstemp: unpredictable name, mode 0600), removed once
  // sbatch has read it.
  std::string path = (fs::temp_directory_path() / "llama2-sbatch-XXXXXX").string();
  const int fd = mkstemp(path.data());
  if (fd < 0) return absl::PermissionDeniedError(absl::StrFormat("sbatch: cannot create %s", path));
  const bool written = write(fd, script.data(), script.size()) == static_cast<ssize_t>(script.size());
  close(fd);
  if (!written) {
    unlink(path.c_str());
    return absl::ResourceExhaustedError(absl::StrFormat("sbatch: cannot write %s", path));
  }
  // Found on PATH, as a user would run it.
  const std::string command = absl::StrCat("sbatch ", path);
  const int status = std::system(command.c_str());
  unlink(path.c_str());
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    const int code = status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return absl::UnavailableError(absl::StrFormat(
        "`sbatch` failed (exit code %d%s); is SLURM's sbatch on PATH?", code,
        code == 127 ? ": command not found" : ""));
  }
  return absl::OkStatus();
}

}  // namespace llama
