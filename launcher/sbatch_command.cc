#include "launcher/sbatch_command.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>

#include <gflags/gflags.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"
#include "launcher/slurm.h"
#include "worker/job.h"
#include "worker/job_flags.h"

DEFINE_int32(nodes, 1, "sbatch: nodes to allocate.");
DEFINE_int32(gpus_per_node, 0,
             "sbatch: GPUs per node (one worker each unless --nproc_per_node); 0: no GPU request, for partitions "
             "without GPUs.");
DEFINE_string(partition, "", "sbatch: partition.");
DEFINE_string(time, "", "sbatch: time limit.");
DEFINE_string(account, "", "sbatch: account.");
DEFINE_string(sbatch_arg, "",
              "sbatch: one more sbatch option for the script (--sbatch_arg=--qos=high); repeat it for more.");
DEFINE_bool(dry_run, false, "sbatch: print the script, do not submit it.");
DEFINE_string(launcher_path, "",
              "sbatch: the launcher binary the compute nodes run, on storage they see (with the worker binary next "
              "to it). Required when this launcher runs from Bazel's output tree.");

namespace llama {
namespace {

namespace fs = std::filesystem;

// The flags a job takes: the job's and the launcher's own, and glog's
// --log_dir (which --help lists with them).
bool IsJobFlag(const gflags::CommandLineFlagInfo& flag) {
  return absl::EndsWith(flag.filename, "worker/job_flags.cc") ||
         absl::EndsWith(flag.filename, "launcher/launcher_flags.cc") || flag.name == "log_dir";
}

// Flags SLURM's placement decides; given to sbatch they would fight it.
// (--nproc_per_node is sbatch's own: the workers per node.)
const std::set<std::string>& PlacementFlags() {
  static const std::set<std::string> flags = {"nnodes", "node_rank", "master_addr"};
  return flags;
}

// Flags the script writes itself: --nproc_per_node from the workers per
// node, each --worker_env (gflags keeps only the last).
bool ScriptWritesFlag(const std::string& name) { return name == "nproc_per_node" || name == "worker_env"; }

// What the job would find missing only after the queue wait: prompts given
// to a server, and (`check_paths`) its input files. A dry run's paths may
// be the cluster's, absent here: it checks the flags only.
absl::Status CheckJobFiles(const JobFlags& flags, bool serve, bool check_paths) {
  if (serve && (!flags.prompt.empty() || !flags.prompts_file.empty() || !flags.dialogs_file.empty())) {
    return absl::InvalidArgumentError(
        "serve takes its prompts over HTTP: drop --prompt, --prompts_file and --dialogs_file");
  }
  if (!check_paths) return absl::OkStatus();
  for (const auto& [flag, path] : {std::pair<const char*, std::string>{"prompts_file", flags.prompts_file},
                                   {"dialogs_file", flags.dialogs_file},
                                   {"tokenizer_path", flags.tokenizer_path},
                                   {"api_key_file", flags.api_key_file},
                                   {"json_schema", flags.json_schema}}) {
    if (!path.empty() && !fs::is_regular_file(path)) {
      return absl::NotFoundError(absl::StrFormat("sbatch: --%s=%s: no such file", flag, path));
    }
  }
  // A schema that does not compile fails the job at its start.
  if (!flags.json_schema.empty()) {
    absl::StatusOr<std::string> grammar = ReadJsonSchemaGrammar(flags.json_schema);
    if (!grammar.ok()) return absl::InvalidArgumentError(absl::StrCat("sbatch: ", grammar.status().message()));
  }
  return absl::OkStatus();
}

// `args` (given after "--") applied to this process's flags, so that they
// are checked as the job's, then every job flag that differs from its
// default, as the script's arguments. `check_paths`: CheckJobFiles'.
absl::StatusOr<std::vector<std::string>> JobArguments(const std::vector<std::string>& args,
                                                      const std::vector<std::string>& worker_env, bool check_paths) {
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
    if (!gflags::GetCommandLineFlagInfo(name.c_str(), &info) || !IsJobFlag(info)) {
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
    if (flag.is_default || !IsJobFlag(flag) || ScriptWritesFlag(flag.name)) continue;
    if (flag.name == "api_key") {
      return absl::InvalidArgumentError(
          "sbatch: --api_key would be written into the batch script: put the key in a file on shared storage and "
          "pass --api_key_file");
    }
    if (PlacementFlags().count(flag.name) > 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "sbatch: --%s is decided by SLURM: use --nodes, --nproc_per_node and --gpus_per_node", flag.name));
    }
    job.push_back(absl::StrCat("--", flag.name, "=", flag.current_value));
  }
  for (const std::string& entry : worker_env) {
    if (entry.find('=') == 0 || entry.find('=') == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrFormat("--worker_env=%s: expected NAME=value", entry));
    }
    job.push_back("--worker_env=" + entry);
  }
  const JobFlags flags = JobFlagsFromCommandLine();
  RETURN_IF_ERROR(CheckJobFlags(flags, /*need_input=*/false));
  RETURN_IF_ERROR(CheckJobFiles(flags, serve, check_paths));
  return job;
}

// The launcher the nodes run, and the worker it will look for beside it.
absl::Status CheckLauncherPath(const std::string& launcher) {
  if (access(launcher.c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrFormat("sbatch: --launcher_path=%s: no such executable", launcher));
  }
  const std::string worker = (fs::path(launcher).parent_path() / "worker").string();
  if (access(worker.c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrFormat(
        "sbatch: no worker binary beside --launcher_path (%s): copy bazel-bin/worker/worker there", worker));
  }
  return absl::OkStatus();
}

// Runs `argv` (found on PATH) with `input` as a file argument; its exit
// code (127: not found) and what it wrote on stdout and stderr.
struct CommandResult {
  int exit_code = -1;
  std::string output;
};
CommandResult RunCapturing(const std::vector<std::string>& argv) {
  CommandResult result;
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return result;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(pipe_fds[1], STDOUT_FILENO);
    dup2(pipe_fds[1], STDERR_FILENO);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    std::vector<char*> args;
    for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  close(pipe_fds[1]);
  if (pid < 0) {
    close(pipe_fds[0]);
    return result;
  }
  char buffer[4096];
  for (ssize_t n; (n = read(pipe_fds[0], buffer, sizeof buffer)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    result.output.append(buffer, n);
  }
  close(pipe_fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// A path under Bazel's output tree: gone or replaced by the next build, and
// often not on storage the compute nodes see.
bool InBazelOutput(const std::string& path) {
  return absl::StrContains(path, "/.cache/bazel/") || absl::StrContains(path, "/bazel-out/") ||
         absl::StrContains(path, "/execroot/");
}

}  // namespace

absl::Status RunSbatchCommand(const std::string& launcher_path, const SbatchRequest& request) {
  SbatchOptions options;
  options.nodes = FLAGS_nodes;
  options.gpus_per_node = FLAGS_gpus_per_node;
  options.partition = FLAGS_partition;
  options.time = FLAGS_time;
  options.account = FLAGS_account;
  options.extra = request.sbatch_options;
  if (options.nodes < 1 || options.gpus_per_node < 0) {
    return absl::InvalidArgumentError("sbatch: --nodes must be >= 1 and --gpus_per_node >= 0");
  }
  for (const std::string& option : options.extra) {
    if (!absl::StartsWith(option, "-") || absl::StrContains(option, "\n")) {
      return absl::InvalidArgumentError(
          absl::StrFormat("sbatch: --sbatch_arg=%s: expected one sbatch option (--qos=high)", option));
    }
  }
  const std::string launcher = FLAGS_launcher_path.empty() ? launcher_path : FLAGS_launcher_path;
  if (FLAGS_launcher_path.empty() && InBazelOutput(launcher)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "sbatch: this launcher runs from Bazel's output tree (%s), which compute nodes may not see and the next "
        "build replaces; copy bazel-bin/launcher/launcher and bazel-bin/worker/worker into one folder on shared "
        "storage and pass --launcher_path=<that folder>/launcher",
        launcher));
  }
  // A dry run's script may be for another machine's paths.
  if (!FLAGS_dry_run) RETURN_IF_ERROR(CheckLauncherPath(launcher));
  ASSIGN_OR_RETURN(const std::vector<std::string> job, JobArguments(request.job_args, request.worker_env, !FLAGS_dry_run));
  // Read after the job's arguments, which may give it too.
  const int nproc_per_node = std::stoi(gflags::GetCommandLineFlagInfoOrDie("nproc_per_node").current_value);
  const bool nproc_given = !gflags::GetCommandLineFlagInfoOrDie("nproc_per_node").is_default;
  options.workers_per_node = nproc_given ? nproc_per_node : std::max(1, options.gpus_per_node);
  if (options.workers_per_node < 1) return absl::InvalidArgumentError("sbatch: --nproc_per_node must be >= 1");
  if (request.check_job) {
    RETURN_IF_ERROR(request.check_job(
        {!job.empty() && job[0] == "serve", options.nodes, options.workers_per_node, options.gpus_per_node, FLAGS_dry_run}));
  }
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
  // Found on PATH, as a user would run it; --parsable: the job id alone
  // ("123" or "123;cluster").
  const CommandResult sbatch = RunCapturing({"sbatch", "--parsable", path});
  unlink(path.c_str());
  const std::string output(absl::StripAsciiWhitespace(sbatch.output));
  if (sbatch.exit_code != 0) {
    if (sbatch.exit_code == 127) {
      return absl::UnavailableError("`sbatch` not found: is SLURM's sbatch on PATH?");
    }
    return absl::UnavailableError(absl::StrFormat("`sbatch` failed (exit code %d): %s", sbatch.exit_code, output));
  }
  // sbatch's warnings come first; the id is its last line.
  const size_t last_line = output.rfind('\n');
  std::string job_id = last_line == std::string::npos ? output : output.substr(last_line + 1);
  job_id = job_id.substr(0, job_id.find(';'));
  if (last_line != std::string::npos) std::fprintf(stderr, "%s\n", output.substr(0, last_line).c_str());
  std::fprintf(stderr, "launcher: submitted batch job %s; its output: %s-%s.out\n", job_id.c_str(),
               options.job_name.c_str(), job_id.c_str());
  std::printf("%s\n", job_id.c_str());
  return absl::OkStatus();
}

}  // namespace llama
