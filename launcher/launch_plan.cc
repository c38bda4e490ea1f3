#include "launcher/launch_plan.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "launcher/meta_models.h"
#include "launcher/slurm.h"
#include "ops/device.h"
#include "ops/dtype.h"

namespace llama {
namespace {

namespace fs = std::filesystem;

// The folder `path` names, absolute and without a trailing separator:
// "llama-2-7b/" (Meta's README, tab completion) and "." name the folder
// itself, whose parent is where download.sh puts tokenizer.model.
fs::path FolderPath(const std::string& path) {
  const fs::path folder = fs::absolute(path).lexically_normal();
  return folder.has_filename() ? folder : folder.parent_path();
}

// Whether the job runs the demo's checkpoint: neither --ckpt_dir nor
// --models (which downloads a real one first, to run as --ckpt_dir would).
bool RunsTheDemo(const LauncherFlags& flags) { return flags.ckpt_dir.empty() && flags.download_models.empty(); }

// What a server calls its model unless --served_model_name says: the
// checkpoint folder's name (a download's too), or "demo".
absl::StatusOr<std::string> DefaultModelName(const LauncherFlags& flags) {
  if (!flags.ckpt_dir.empty()) return FolderPath(flags.ckpt_dir).filename().string();
  if (RunsTheDemo(flags)) return std::string("demo");
  ASSIGN_OR_RETURN(const std::string dir, DownloadedCheckpointDir(flags.download_models, flags.download_target_dir));
  return fs::path(dir).filename().string();
}

// Removes `word` from `words`; whether it was there.
bool TakeWord(std::vector<std::string>& words, const std::string& word) {
  auto it = std::find(words.begin(), words.end(), word);
  if (it == words.end()) return false;
  words.erase(it);
  return true;
}

// The subcommand; gflags leaves "sbatch" and the job's flags after "--" in
// some order.
absl::Status PlanCommand(std::vector<std::string> words, const LauncherFlags& flags, const LaunchContext& context,
                         LaunchPlan& plan) {
  if (TakeWord(words, "download")) {
    if (!words.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("download: unexpected argument \"", words[0], "\""));
    }
    plan.command = LaunchCommand::kDownload;
    return absl::OkStatus();
  }
  if (TakeWord(words, "sbatch")) {
    plan.command = LaunchCommand::kSbatch;
    plan.sbatch_args = std::move(words);
    plan.sbatch_options = flags.sbatch_options;
    plan.worker_environment = flags.worker_environment;
    return absl::OkStatus();
  }
  if (TakeWord(words, "chat")) {
    // A chat is a server on a private port, and its client.
    plan.command = LaunchCommand::kChat;
    plan.job.host = "127.0.0.1";
    plan.job.port = 0;
    plan.job.api_key = context.chat_api_key;
  } else if (TakeWord(words, "serve")) {
    plan.command = LaunchCommand::kServe;
    // The key in the launcher's environment is the server's: rank 0 (and
    // every replica) gets it from the launcher, which keeps the variable
    // itself out of the workers' inherited environment.
    if (const char* key = context.getenv(kApiKeyVariable); plan.job.api_key.empty() && key != nullptr) {
      plan.job.api_key = key;
    }
  }
  if (plan.command != LaunchCommand::kJob) {
    plan.job.serve = true;
    if (plan.job.served_model_name.empty()) {
      ASSIGN_OR_RETURN(plan.job.served_model_name, DefaultModelName(flags));
    }
  }
  if (!words.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("unexpected argument \"", words[0], "\" (see --help)"));
  }
  return absl::OkStatus();
}

// The ranks and nodes: the flags, or SLURM's placement inside an srun step.
absl::Status PlanWorld(const LauncherFlags& flags, const LaunchContext& context, LaunchPlan& plan) {
  WorldOptions& world = plan.world;
  world.nnodes = flags.nnodes;
  world.nproc_per_node = flags.nproc_per_node;
  // The demo shows tensor parallelism: 2 workers unless told otherwise. A
  // download's model is a real one: 1, as for --ckpt_dir (and 1 GPU).
  if (RunsTheDemo(flags) && !flags.nproc_per_node_given) world.nproc_per_node = 2;
  world.node_rank = flags.node_rank;
  world.master_addr = flags.master_addr;
  world.master_port = flags.master_port;
  plan.master_addr_origin = absl::StrCat("--master_addr=", world.master_addr);
  ASSIGN_OR_RETURN(const std::optional<SlurmPlacement> slurm, ReadSlurmPlacement(context.getenv));
  if (slurm.has_value()) {
    world.nnodes = slurm->nnodes;
    world.node_rank = slurm->node_rank;
    // The first node's name, unless the user knows better (node names that
    // do not resolve where Slurm's NodeAddr is set, another network).
    if (!flags.master_addr_given) {
      world.master_addr = slurm->master_addr;
      plan.master_addr_origin = absl::StrFormat(
          "node 0's address \"%s\" (the first node of SLURM_JOB_NODELIST; pass --master_addr=<its address>)",
          world.master_addr);
    }
    if (world.master_port == 0) {
      world.master_port = slurm->master_port;
      plan.master_port_origin = absl::StrFormat(
          "the job's port %d (from SLURM_JOB_ID)", world.master_port);
    }
  }
  if (plan.master_port_origin.empty()) {
    plan.master_port_origin = absl::StrFormat("--master_port=%d", world.master_port);
  }
  // Node 0 binds the store's port and hands the socket to rank 0
  // (RENDEZVOUS_LISTEN_FD): finding a port free and letting rank 0 bind it
  // later would race other jobs. A job on one node takes any free port.
  if (world.master_port == 0 && world.nnodes != 1) world.master_port = kDefaultMasterPort;
  plan.bind_store = world.node_rank == 0;
  plan.store_listen_all = flags.store_listen_all;
  plan.token_file = flags.token_file;
  plan.world_size = world.nnodes * world.nproc_per_node;
  // Checked now, before any work; a port of 0 on node 0 means any free
  // one, which Execute binds.
  WorldOptions checked = world;
  if (plan.bind_store && checked.master_port == 0) checked.master_port = kDefaultMasterPort;
  return ValidateWorldOptions(checked);
}

// The launcher's environment, then each --worker_env, a name once (the
// last value wins).
absl::Status PlanWorkerEnvironment(const LauncherFlags& flags, const LaunchContext& context, LaunchPlan& plan) {
  std::vector<std::string>& env = plan.worker_environment;
  const auto set = [&env](const std::string& entry) {
    const std::string name = entry.substr(0, entry.find('=') + 1);
    env.erase(std::remove_if(env.begin(), env.end(),
                             [&](const std::string& e) { return e.compare(0, name.size(), name) == 0; }),
              env.end());
    env.push_back(entry);
  };
  for (const std::string& entry : context.environment) {
    if (entry.find('=') != std::string::npos) env.push_back(entry);
  }
  for (const std::string& entry : flags.worker_environment) {
    const size_t eq = entry.find('=');
    if (eq == 0 || eq == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrFormat("--worker_env=%s: expected NAME=value", entry));
    }
    set(entry);
  }
  return absl::OkStatus();
}

// --data_parallel_size, --routing, --max_restarts: replicas are a server's,
// on one node.
absl::Status PlanReplicas(const LauncherFlags& flags, LaunchPlan& plan) {
  const int replicas = flags.data_parallel_size;
  if (replicas < 1) {
    return absl::InvalidArgumentError(absl::StrFormat("--data_parallel_size=%d: expected at least 1", replicas));
  }
  if (flags.max_restarts < 0) {
    return absl::InvalidArgumentError(absl::StrFormat("--max_restarts=%d: expected at least 0", flags.max_restarts));
  }
  ASSIGN_OR_RETURN(plan.routing, ParseRoutingPolicy(flags.routing));
  plan.data_parallel_size = replicas;
  plan.max_restarts = flags.max_restarts;
  if (replicas == 1) return absl::OkStatus();
  if (plan.command != LaunchCommand::kServe) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--data_parallel_size=%d: replicas are for launcher serve; a batch job or a chat runs one engine", replicas));
  }
  if (replicas % plan.world.nnodes != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--data_parallel_size=%d on %d nodes: give each node as many replicas (a multiple of the node count)",
        replicas, plan.world.nnodes));
  }
  plan.replicas_per_node = replicas / plan.world.nnodes;
  // Each replica binds its own store; across nodes node 0 binds the port
  // of the registry where the others say where their replicas serve.
  plan.bind_store = plan.world.nnodes > 1 && plan.world.node_rank == 0;
  plan.world_size = plan.world.nproc_per_node;  // A replica's: its shards are for that many ranks.
  return absl::OkStatus();
}

// --device, else CUDA when built in and a GPU is visible; a GPU per local
// rank of every replica, or, on CPUs, each replica's share of the CPUs.
absl::Status PlanDevice(const LaunchContext& context, LaunchPlan& plan) {
  ASSIGN_OR_RETURN(const Device device,
                   ChooseDevice(plan.job.device, context.built_with_cuda ? context.visible_gpus.size() : 0));
  plan.device = std::string(DeviceName(device));
  const int replicas = plan.data_parallel_size;
  if (device != Device::kCuda) {
    if (replicas == 1) return absl::OkStatus();
    const std::vector<int>& cpus = context.allowed_cpus;
    const int local = plan.replicas_per_node;
    if (static_cast<int>(cpus.size()) < local * plan.world.nproc_per_node) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--data_parallel_size=%d x --nproc_per_node=%d needs a CPU per rank; this process may run on %d",
          local, plan.world.nproc_per_node, cpus.size()));
    }
    // Contiguous shares, sizes differing by at most one.
    for (int r = 0, next = 0; r < local; ++r) {
      const int size = static_cast<int>(cpus.size()) / local + (r < static_cast<int>(cpus.size()) % local);
      plan.replica_cpus.emplace_back(cpus.begin() + next, cpus.begin() + next + size);
      next += size;
    }
    return absl::OkStatus();
  }
  const int ranks = plan.world.nproc_per_node * plan.replicas_per_node;
  if (static_cast<int>(context.visible_gpus.size()) < ranks) {
    return absl::InvalidArgumentError(
        replicas == 1 ? absl::StrFormat("--nproc_per_node=%d needs %d GPUs on this node; %d visible", ranks, ranks,
                                        context.visible_gpus.size())
                      : absl::StrFormat("--nproc_per_node=%d x %d replica(s) needs %d GPUs on this node; "
                                        "%d visible",
                                        plan.world.nproc_per_node, plan.replicas_per_node, ranks,
                                        context.visible_gpus.size()));
  }
  plan.gpus = context.visible_gpus;
  return absl::OkStatus();
}

// Where the checkpoint comes from and how it is converted for the world size.
absl::Status PlanModel(const LauncherFlags& flags, const LaunchContext& context, LaunchPlan& plan) {
  plan.ckpt_dir = flags.ckpt_dir.empty() ? "" : FolderPath(flags.ckpt_dir).string();
  plan.tokenizer_path = plan.job.tokenizer_path;
  plan.chat_format = flags.chat_format;
  // No checkpoint but --models: fetch it first, as download.sh would.
  plan.download = plan.ckpt_dir.empty() && !flags.download_models.empty();
  plan.download_models = flags.download_models;
  plan.download_target_dir = flags.download_target_dir;
  plan.demo = RunsTheDemo(flags);
  if (plan.demo) {
    plan.demo_dir = flags.demo_dir.empty() ? absl::StrCat(context.cache_dir, "/demo") : flags.demo_dir;
    JobFlags& job = plan.job;
    plan.demo_prompts = job.prompt.empty() && job.prompts_file.empty() && job.dialogs_file.empty();
    if (plan.demo_prompts && job.max_gen_len < 0) job.max_gen_len = 32;
  }
  ConvertOptions& convert = plan.convert;
  convert.out_dir = plan.job.shard_dir;
  convert.world_size = plan.world_size;
  if (!flags.weights_dtype.empty()) {
    ASSIGN_OR_RETURN(convert.dtype, ParseWeightsDtypeFlag("weights_dtype", flags.weights_dtype));
  }
  convert.show_progress = true;
  convert.world_size_flag =
      absl::StrFormat("--nproc_per_node=%d x --nnodes=%d", plan.world.nproc_per_node, plan.world.nnodes);
  if (!flags.draft_weights_dtype.empty() || !flags.draft_ckpt_dir.empty()) {
    if (!plan.job.draft_shard_dir.empty() || plan.job.speculative_ngram) {
      return absl::InvalidArgumentError(
          "give one source of speculative guesses: --draft_ckpt_dir or --draft_weights_dtype, --draft_shard_dir "
          "or --speculative_ngram");
    }
    ConvertOptions draft = convert;
    // Empty: the model's own checkpoint (self-speculation), known once it
    // is downloaded or made (PrepareModel).
    draft.ckpt_dir = flags.draft_ckpt_dir;
    if (!flags.draft_weights_dtype.empty()) {
      ASSIGN_OR_RETURN(draft.dtype, ParseWeightsDtypeFlag("draft_weights_dtype", flags.draft_weights_dtype));
    }
    const bool cpu_only = draft.dtype == DType::kQ4_K || draft.dtype == DType::kQ8_0;
    if (flags.draft_ckpt_dir.empty() && !cpu_only) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--draft_weights_dtype=%s: expected q4_k or int8", flags.draft_weights_dtype));
    }
    if (!flags.draft_weights_dtype.empty() && cpu_only && plan.device == DeviceName(Device::kCuda)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--draft_weights_dtype=%s: q4_k and int8 weights run on CPUs only; on GPUs give a smaller model as "
          "--draft_ckpt_dir",
          flags.draft_weights_dtype));
    }
    draft.out_dir.clear();
    draft.world_size = 1;
    draft.world_size_flag = "one rank (the draft)";
    plan.draft_convert = draft;
  }
  plan.shard_cache_dir = absl::StrCat(context.cache_dir, "/shards");
  // With node-local shards each node is node 0 of its own storage.
  plan.preparation.node_rank = flags.node_local_shards ? 0 : plan.world.node_rank;
  plan.preparation.nnodes = plan.world.nnodes;
  plan.preparation.deadline = std::chrono::seconds(plan.job.rendezvous_timeout);
  plan.worker_binary = flags.worker;
  return absl::OkStatus();
}

// Logs, grace and, for a chat, the client's settings.
void PlanSupervision(const LauncherFlags& flags, const LaunchContext& context, LaunchPlan& plan) {
  // A folder of its own for each run's logs, so the next run keeps them.
  // Outside the shard folder, which may be read-only and is shared by every node.
  plan.supervise.log_dir = !flags.log_dir.empty() ? flags.log_dir
                                                  : absl::StrFormat("%s/logs/%s-node%d-%d", context.cache_dir,
                                                                    context.run_stamp, plan.world.node_rank,
                                                                    context.pid);
  plan.summary_path = plan.supervise.log_dir + "/summary.json";
  plan.supervise.grace = std::chrono::seconds(flags.grace_period);
  // A server drains before it exits: its grace covers the drain.
  if (plan.command != LaunchCommand::kJob) {
    plan.supervise.grace =
        std::max<std::chrono::milliseconds>(plan.supervise.grace, std::chrono::seconds(plan.job.drain_timeout + 10));
  }
  if (plan.command == LaunchCommand::kChat) {
    plan.chat = {plan.job.served_model_name, plan.job.api_key, flags.system_prompt, JobSamplingParams(plan.job),
                 plan.job.max_gen_len};
  }
}

}  // namespace

absl::StatusOr<LaunchPlan> PlanLaunch(std::vector<std::string> words, const LauncherFlags& flags,
                                      const LaunchContext& context) {
  LaunchPlan plan;
  plan.job = flags.job;
  RETURN_IF_ERROR(PlanCommand(std::move(words), flags, context, plan));
  if (plan.command == LaunchCommand::kDownload || plan.command == LaunchCommand::kSbatch) return plan;
  // Everything checkable is checked before any work.
  const bool serving = plan.command != LaunchCommand::kJob;
  // Only the demo has prompts of its own; a download's job needs them before
  // the download, not after.
  RETURN_IF_ERROR(CheckJobFlags(plan.job, /*need_input=*/!serving && !RunsTheDemo(flags)));
  if (serving && (!plan.job.prompt.empty() || !plan.job.prompts_file.empty() || !plan.job.dialogs_file.empty())) {
    return absl::InvalidArgumentError(plan.command == LaunchCommand::kChat
                                          ? "chat takes its turns from the terminal (or stdin): drop --prompt, "
                                            "--prompts_file and --dialogs_file"
                                          : "serve takes its prompts over HTTP: drop --prompt, --prompts_file and "
                                            "--dialogs_file");
  }
  RETURN_IF_ERROR(PlanWorld(flags, context, plan));
  RETURN_IF_ERROR(PlanWorkerEnvironment(flags, context, plan));
  RETURN_IF_ERROR(PlanReplicas(flags, plan));
  RETURN_IF_ERROR(PlanDevice(context, plan));
  RETURN_IF_ERROR(PlanModel(flags, context, plan));
  PlanSupervision(flags, context, plan);
  return plan;
}

bool LauncherSetsVariable(const std::string& name, bool gpus) {
  // Every rank variable, whether or not this rank gets it (only rank 0 has
  // a listening socket or the API key: the others must not inherit one).
  WorkerEnvironment all;
  all.token = "x";
  all.listen_fd = 0;
  for (const auto& [variable, value] : WorkerEnvironmentVariables(all)) {
    if (variable == name) return true;
  }
  return name == kApiKeyVariable || (gpus && name == "CUDA_VISIBLE_DEVICES");
}

absl::StatusOr<std::string> DownloadedCheckpointDir(const std::string& models, const std::string& target_dir) {
  ASSIGN_OR_RETURN(const MetaModel first, LookUpMetaModel(std::vector<std::string>(absl::StrSplit(models, ','))[0]));
  return (fs::path(target_dir) / first.folder).string();
}

std::vector<WorkerLaunch> WorkerLaunches(const LaunchPlan& plan, const PreparedJob& prepared) {
  const std::vector<std::string> job_flags = WorkerArguments(plan.job);
  std::vector<WorkerLaunch> launches;
  for (WorkerEnvironment rank : prepared.ranks) {
    WorkerLaunch launch;
    launch.rank = rank.rank;
    std::vector<std::string>& argv = launch.process.argv;
    argv = {prepared.worker_binary, "--shard_dir=" + prepared.shard_dir,
            "--tokenizer_path=" + fs::absolute(prepared.tokenizer_path).string()};
    argv.insert(argv.end(), job_flags.begin(), job_flags.end());
    if (!prepared.draft_shard_dir.empty()) {
      argv.push_back("--draft_shard_dir=" + fs::absolute(prepared.draft_shard_dir).string());
    }
    argv.push_back("--device=" + plan.device);
    argv.push_back("--summary_file=" + plan.summary_path);
    rank.token = prepared.token;
    if (rank.rank == 0 && prepared.store_fd >= 0) {
      launch.process.inherit_fd = prepared.store_fd;
      rank.listen_fd = prepared.store_fd;
    }
    std::vector<std::string> own;  // What the launcher sets.
    for (const auto& [name, value] : WorkerEnvironmentVariables(rank)) own.push_back(name + "=" + value);
    if (!plan.gpus.empty()) own.push_back("CUDA_VISIBLE_DEVICES=" + plan.gpus[rank.local_rank]);
    // The API key reaches rank 0 in its environment, never on a command line.
    if (rank.rank == 0 && !plan.job.api_key.empty()) own.push_back(absl::StrCat(kApiKeyVariable, "=", plan.job.api_key));
    for (const std::string& entry : plan.worker_environment) {
      const std::string name = entry.substr(0, entry.find('='));
      if (!LauncherSetsVariable(name, !plan.gpus.empty())) launch.process.env.push_back(entry);
    }
    launch.process.env.insert(launch.process.env.end(), own.begin(), own.end());
    launches.push_back(std::move(launch));
  }
  return launches;
}

}  // namespace llama
