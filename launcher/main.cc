// //launcher: what torchrun and the reference's example scripts do for a
// Python user: prepare shards, start one worker per rank with the job's
// environment, supervise them, and print rank 0's results.
// See --help (the usage message below) for the manual.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gflags/gflags.h>
#include <glog/logging.h>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "checkpoint/converter.h"
#include "checkpoint/io/progress.h"
#include "launcher/demo.h"
#include "launcher/chat.h"
#include "launcher/download.h"
#include "launcher/download_command.h"
#include "launcher/preflight.h"
#include "launcher/sbatch_command.h"
#include "launcher/shard_preparation.h"
#include "launcher/slurm.h"
#include "launcher/supervisor.h"
#include "launcher/usage.h"
#include "launcher/world.h"
#include "ops/device.h"
#include "ops/dtype.h"
#include "worker/flag_help.h"
#include "worker/job_flags.h"
#include "worker/net/net.h"

// Topology (torchrun's flags).
DEFINE_int32(nproc_per_node, 1, "Workers (ranks) on this node; one per GPU on GPU machines.");
DEFINE_int32(nnodes, 1, "Nodes in the job.");
DEFINE_int32(node_rank, 0, "This node's index, 0 <= node_rank < nnodes.");
DEFINE_string(master_addr, "127.0.0.1", "Host of node 0, where rank 0 hosts the rendezvous store.");
DEFINE_bool(store_listen_all, false,
            "Node 0's rendezvous store listens on every interface, not only on the one that reaches "
            "--master_addr (for nodes that reach node 0 through another address, e.g. across NAT).");
DEFINE_int32(master_port, 0, "Rendezvous port on node 0. Default: a free port on one node, 29500 across nodes.");
// Model.
DEFINE_string(system_prompt, "", "launcher chat: the system message that opens the dialog.");
DEFINE_string(ckpt_dir, "",
              "Meta's checkpoint folder (consolidated.NN.pth, params.json) or a Hugging Face one (config.json, "
              "safetensors). Empty: the demo job.");
DEFINE_string(weights_dtype, "",
              "Convert the weights to bf16, fp16, fp32 or int8 (8-bit blocks for the linear layers, CPU only). "
              "Default: as stored. Shards of another type live in their own folder (shards/tp<N>-<type>).");
DEFINE_bool(node_local_shards, false,
            "Multi-node: every node converts its own shards (nodes that share no storage). By default node 0 "
            "converts and the other nodes wait for its shards on the shared storage.");
// Job and model flags (--prompt, --temperature, --max_seq_len, --device, ...): worker/job_flags.h.
// Running.
DEFINE_string(worker, "", "The worker binary. Default: //worker from this binary's runfiles.");
// --log_dir (per-rank logs; default one folder per run under
// ~/.cache/llama2-cpp/logs, see RunLogDir) is glog's flag, reused:
// the launcher logs to stderr, so glog writes no files there.
DECLARE_string(log_dir);
DEFINE_string(token_file, "", "File holding the job's shared secret (else $RENDEZVOUS_TOKEN, else a fresh one on one node).");
DEFINE_int32(grace_period, 5, "Seconds between SIGTERM and SIGKILL when stopping workers.");
DEFINE_string(demo_dir, "", "Where the demo job keeps its checkpoint. Default: ~/.cache/llama2-cpp/demo "
              "($XDG_CACHE_HOME/llama2-cpp/demo when set).");


namespace llama {
namespace {

namespace fs = std::filesystem;

// The folder `path` names, absolute and without a trailing separator.
fs::path FolderPath(const std::string& path) {
  const fs::path folder = fs::absolute(path).lexically_normal();
  return folder.has_filename() ? folder : folder.parent_path();
}

int Fail(absl::string_view message) {
  std::fprintf(stderr, "launcher: %.*s\n", static_cast<int>(message.size()), message.data());
  return 1;
}

int ReportStatus(const absl::Status& status) { return status.ok() ? 0 : Fail(status.message()); }

std::string SelfPath() {
  std::error_code error;
  return fs::read_symlink("/proc/self/exe", error).string();
}

// //worker next to us: in our runfiles (bazel run), in bazel-bin, or in the
// same folder.
absl::StatusOr<std::string> FindWorker() {
  if (!FLAGS_worker.empty()) return FLAGS_worker;
  const std::string self = SelfPath();
  std::vector<std::string> candidates;
  if (const char* runfiles = std::getenv("RUNFILES_DIR"); runfiles != nullptr) {
    candidates.push_back(absl::StrCat(runfiles, "/llama2_cpp/worker/worker"));
  }
  candidates.push_back(self + ".runfiles/llama2_cpp/worker/worker");
  // Both binaries copied into one folder (launcher sbatch --launcher_path).
  candidates.push_back((fs::path(self).parent_path() / "worker").string());
  candidates.push_back((fs::path(self).parent_path().parent_path() / "worker" / "worker").string());
  for (const std::string& c : candidates) {
    if (access(c.c_str(), X_OK) == 0) return c;
  }
  return absl::NotFoundError(absl::StrFormat(
      "cannot find the worker binary next to %s; build //worker or pass --worker=PATH", self));
}

// GPUs this process may use: CUDA_VISIBLE_DEVICES when set, else the
// NVIDIA driver's list. Read without the CUDA runtime, which the launcher
// does not link.
std::vector<std::string> VisibleGpus() {
  std::vector<std::string> gpus;
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"); visible != nullptr) {
    for (absl::string_view id : absl::StrSplit(visible, ',', absl::SkipEmpty())) gpus.emplace_back(id);
    return gpus;
  }
  std::error_code error;
  size_t count = 0;
  for (const auto& entry : fs::directory_iterator("/proc/driver/nvidia/gpus", error)) {
    (void)entry;
    gpus.push_back(std::to_string(count++));
  }
  return gpus;
}

// Our folder `what` in the user's cache: $XDG_CACHE_HOME/llama2-cpp/<what>,
// else ~/.cache/llama2-cpp/<what> (/tmp without a HOME).
std::string CacheDir(absl::string_view what) {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  const std::string root = xdg != nullptr && *xdg == '/' ? xdg : absl::StrCat(home != nullptr ? home : "/tmp", "/.cache");
  return absl::StrCat(root, "/llama2-cpp/", what);
}

// A folder of its own for each run's logs, so the next run keeps them:
// <cache>/logs/<local time>-node<N>-<pid>. Outside the shard folder, which
// may be read-only and is shared by every node.
std::string RunLogDir(int node_rank) {
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
  return absl::StrFormat("%s/%s-node%d-%d", CacheDir("logs"), stamp, node_rank, getpid());
}

// The last line a rank wrote (its error, when it failed), without the
// "[rank R] " prefix and the worker's own "worker rank R: ".
std::string LastLogLine(const std::string& log) {
  std::ifstream in(log);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!absl::StripAsciiWhitespace(line).empty()) last = line;
  }
  absl::string_view text = absl::StripAsciiWhitespace(last);
  for (absl::string_view prefix : {"[rank ", "worker rank "}) {
    if (absl::StartsWith(text, prefix)) {
      const size_t end = text.find(prefix == "[rank " ? "] " : ": ");
      if (end != absl::string_view::npos) text.remove_prefix(end + 2);
    }
  }
  return std::string(text);
}

std::string RandomToken() {
  std::random_device device;
  return absl::StrFormat("%08x%08x%08x%08x", device(), device(), device(), device());
}

absl::StatusOr<std::string> JobToken(bool single_node) {
  if (!FLAGS_token_file.empty()) {
    std::ifstream in(FLAGS_token_file);
    std::stringstream text;
    text << in.rdbuf();
    const std::string token(absl::StripAsciiWhitespace(text.str()));
    if (!in || token.empty()) {
      return absl::InvalidArgumentError(absl::StrFormat("--token_file \"%s\": missing or empty", FLAGS_token_file));
    }
    return token;
  }
  if (const char* token = std::getenv("RENDEZVOUS_TOKEN"); token != nullptr && *token != '\0') return std::string(token);
  if (single_node) return RandomToken();
  return absl::InvalidArgumentError(
      "a job across nodes needs a secret shared by all nodes: set RENDEZVOUS_TOKEN or --token_file on every node");
}

int Run(std::vector<std::string> extra_args) {
  if (auto it = std::find(extra_args.begin(), extra_args.end(), "download"); it != extra_args.end()) {
    extra_args.erase(it);
    if (!extra_args.empty()) return Fail(absl::StrCat("download: unexpected argument \"", extra_args[0], "\""));
    return ReportStatus(RunDownloadCommand());
  }
  // gflags leaves "sbatch" and the job's flags after "--" in some order.
  if (auto it = std::find(extra_args.begin(), extra_args.end(), "sbatch"); it != extra_args.end()) {
    extra_args.erase(it);
    return ReportStatus(RunSbatchCommand(SelfPath(), extra_args));
  }
  const bool chatting = std::find(extra_args.begin(), extra_args.end(), "chat") != extra_args.end();
  if (chatting) {
    // A chat is a server on a private port, and its client.
    extra_args.erase(std::find(extra_args.begin(), extra_args.end(), "chat"));
    extra_args.push_back("serve");
    FLAGS_host = "127.0.0.1";
    FLAGS_port = 0;
    FLAGS_api_key = RandomToken();
  }
  const bool serving = std::find(extra_args.begin(), extra_args.end(), "serve") != extra_args.end();
  if (serving) {
    extra_args.erase(std::find(extra_args.begin(), extra_args.end(), "serve"));
    FLAGS_serve = true;
    if (FLAGS_served_model_name.empty()) {
      FLAGS_served_model_name =
          FLAGS_ckpt_dir.empty() ? "demo" : FolderPath(FLAGS_ckpt_dir).filename().string();
    }
  }
  if (!extra_args.empty()) return Fail(absl::StrCat("unexpected argument \"", extra_args[0], "\" (see --help)"));

  // Everything checkable is checked before any work.
  if (absl::Status s = CheckJobFlags(JobFlagsFromCommandLine(), /*need_input=*/!serving && !FLAGS_ckpt_dir.empty());
      !s.ok()) {
    return Fail(s.message());
  }
  if (serving && (!FLAGS_prompt.empty() || !FLAGS_prompts_file.empty() || !FLAGS_dialogs_file.empty())) {
    return Fail("serve takes its prompts over HTTP: drop --prompt, --prompts_file and --dialogs_file");
  }
  WorldOptions world;
  world.nnodes = FLAGS_nnodes;
  world.nproc_per_node = FLAGS_nproc_per_node;
  // The demo shows tensor parallelism: 2 workers unless told otherwise.
  if (FLAGS_ckpt_dir.empty() && gflags::GetCommandLineFlagInfoOrDie("nproc_per_node").is_default) {
    world.nproc_per_node = 2;
  }
  world.node_rank = FLAGS_node_rank;
  world.master_addr = FLAGS_master_addr;
  world.master_port = FLAGS_master_port;
  absl::StatusOr<std::optional<SlurmPlacement>> slurm = ReadSlurmPlacement();
  if (!slurm.ok()) return Fail(slurm.status().message());
  if (slurm->has_value()) {
    world.nnodes = (*slurm)->nnodes;
    world.node_rank = (*slurm)->node_rank;
    world.master_addr = (*slurm)->master_addr;
    if (world.master_port == 0) world.master_port = (*slurm)->master_port;
  }
  const bool single_node = world.nnodes == 1;
  // Node 0 binds the store's port here and hands the socket to rank 0
  // (RENDEZVOUS_LISTEN_FD): finding a port free and letting rank 0 bind it
  // later would race other jobs. A job on one node takes any free port.
  if (world.master_port == 0 && !single_node) world.master_port = kDefaultMasterPort;
  net::Socket store_listener;
  if (world.node_rank == 0) {
    // The store holds the job's token exchange: it listens only where the
    // other ranks reach it (loopback for a one-node job), not on every network.
    absl::StatusOr<std::string> listen_address =
        FLAGS_store_listen_all ? absl::StatusOr<std::string>("0.0.0.0") : net::AddressReaching(world.master_addr);
    if (!listen_address.ok()) {
      return Fail(absl::StrFormat("--master_addr=%s: %s", world.master_addr, listen_address.status().message()));
    }
    absl::StatusOr<net::Socket> listener = net::Listen(*listen_address, world.master_port);
    if (absl::IsFailedPrecondition(listener.status())) {
      return Fail(absl::StrFormat("--master_port=%d is already in use on this node; pick another", world.master_port));
    }
    if (!listener.ok()) return Fail(listener.status().message());
    absl::StatusOr<int> port = net::LocalPort(*listener);
    if (!port.ok()) return Fail(port.status().message());
    store_listener = *std::move(listener);
    world.master_port = *port;
  }
  absl::StatusOr<std::vector<WorkerEnvironment>> ranks = LocalRanks(world);
  if (!ranks.ok()) return Fail(ranks.status().message());
  std::string device = FLAGS_device;
  if (device.empty()) device = BuiltWithCuda() && !VisibleGpus().empty() ? "cuda" : "cpu";
  if (absl::StatusOr<Device> parsed = ParseDevice(device); !parsed.ok()) return Fail(parsed.status().message());
  std::vector<std::string> gpus;
  if (device == "cuda") {
    gpus = VisibleGpus();
    if (static_cast<int>(gpus.size()) < world.nproc_per_node) {
      return Fail(absl::StrFormat("--nproc_per_node=%d needs %d GPUs on this node; %d visible", world.nproc_per_node,
                                  world.nproc_per_node, gpus.size()));
    }
  }
  const int world_size = world.nnodes * world.nproc_per_node;
  absl::StatusOr<std::string> token = JobToken(single_node);
  if (!token.ok()) return Fail(token.status().message());

  auto prepare_start = std::chrono::steady_clock::now();
  // The model: Meta's checkpoint, or the demo's.
  // "llama-2-7b/" (Meta's README, tab completion) and "." name the folder
  // itself: its parent is where download.sh puts tokenizer.model.
  std::string ckpt_dir = FLAGS_ckpt_dir.empty() ? "" : FolderPath(FLAGS_ckpt_dir).string();
  std::string tokenizer = FLAGS_tokenizer_path;
  // No checkpoint but a URL and --models: fetch it first, as download.sh would.
  if (ckpt_dir.empty() && !FLAGS_models.empty()) {
    if (absl::Status s = RunDownloadCommand(); !s.ok()) return ReportStatus(s);
    absl::StatusOr<MetaModel> first = LookUpMetaModel(std::vector<std::string>(absl::StrSplit(FLAGS_models, ','))[0]);
    if (!first.ok()) return Fail(first.status().message());
    ckpt_dir = (fs::path(FLAGS_target_dir) / first->folder).string();
  }
  const bool demo = ckpt_dir.empty();
  if (demo) {
    const std::string demo_dir = FLAGS_demo_dir.empty() ? CacheDir("demo") : FLAGS_demo_dir;
    prepare_start = std::chrono::steady_clock::now();
    absl::StatusOr<DemoCheckpoint> made = PrepareDemoCheckpoint(demo_dir);
    if (!made.ok()) return Fail(made.status().message());
    ckpt_dir = made->ckpt_dir;
    tokenizer = made->tokenizer_path;
    if (FLAGS_prompt.empty() && FLAGS_prompts_file.empty() && FLAGS_dialogs_file.empty()) {
      FLAGS_prompts_file = made->prompts_file;
      if (FLAGS_max_gen_len < 0) FLAGS_max_gen_len = 32;
    }
    std::fprintf(stderr,
                 "launcher: demo job: a small Llama 2 checkpoint with RANDOM weights in %s (no download);\n"
                 "          the completions are meaningless text, produced by the real pipeline.\n",
                 ckpt_dir.c_str());
  }
  if (absl::Status s = CheckCheckpointFolder(ckpt_dir); !s.ok()) return Fail(s.message());
  if (tokenizer.empty()) {
    // download.sh's Llama 2 layout (beside the model folders), Llama 3's
    // (inside), a Hugging Face Llama 3 repository's (original/).
    for (const fs::path& candidate : {fs::path(ckpt_dir) / "original" / "tokenizer.model",
                                     fs::path(ckpt_dir).parent_path() / "tokenizer.model",
                                     fs::path(ckpt_dir) / "tokenizer.model"}) {
      if (fs::exists(candidate)) tokenizer = candidate.string();
    }
    if (tokenizer.empty()) {
      // Hugging Face's Llama 2 repositories ship tokenizer.model beside
      // tokenizer.json; a copy without it has only the fast tokenizer.
      const bool hf_json_only = fs::exists(fs::path(ckpt_dir) / "tokenizer.json");
      return Fail(absl::StrFormat("no tokenizer.model in or next to %s%s; pass --tokenizer_path", ckpt_dir,
                                  hf_json_only ? " (it has Hugging Face's tokenizer.json, which we do not read: fetch "
                                                 "tokenizer.model from the same repository)"
                                               : ""));
    }
  }
  // Before converting or starting anything: the job's inputs as the worker
  // will read them.
  std::string warning;
  if (absl::Status s = CheckJobInputs(tokenizer, JobFlagsFromCommandLine(), &warning); !s.ok()) {
    return Fail(s.message());
  }
  if (!warning.empty()) std::fprintf(stderr, "launcher: warning: %s\n", warning.c_str());
  ConvertOptions convert;
  convert.ckpt_dir = ckpt_dir;
  convert.out_dir = FLAGS_shard_dir;
  convert.world_size = world_size;
  if (!FLAGS_weights_dtype.empty()) {
    absl::StatusOr<DType> dtype = ParseWeightsDtypeFlag("weights_dtype", FLAGS_weights_dtype);
    if (!dtype.ok()) return Fail(dtype.status().message());
    convert.dtype = *dtype;
  }
  if (convert.out_dir.empty()) {
    absl::StatusOr<ShardLocation> location = ChooseShardDir(convert, CacheDir("shards"));
    if (!location.ok()) return Fail(location.status().message());
    if (!location->note.empty()) std::fprintf(stderr, "launcher: %s\n", location->note.c_str());
    convert.out_dir = location->dir;
  }
  const std::string shard_dir = convert.out_dir;
  convert.verify_checklist = fs::exists(fs::path(ckpt_dir) / "checklist.chk");
  convert.show_progress = true;
  convert.world_size_flag = absl::StrFormat("--nproc_per_node=%d x --nnodes=%d", world.nproc_per_node, world.nnodes);
  ShardPreparation preparation;
  preparation.convert = convert;
  // With node-local shards each node is node 0 of its own storage.
  preparation.node_rank = FLAGS_node_local_shards ? 0 : world.node_rank;
  preparation.nnodes = world.nnodes;
  preparation.deadline = std::chrono::seconds(FLAGS_rendezvous_timeout);
  preparation.job_token = *token;
  absl::StatusOr<ConvertResult> converted = PrepareShards(preparation);
  if (!converted.ok()) return Fail(converted.status().message());
  std::fprintf(stderr, "launcher: %s %s\n", converted->up_to_date ? "shards up to date in" : "converted to",
               shard_dir.c_str());

  absl::StatusOr<std::string> worker = FindWorker();
  if (!worker.ok()) return Fail(worker.status().message());

  std::vector<WorkerLaunch> launches;
  const std::vector<std::string> job_flags = WorkerArguments(JobFlagsFromCommandLine());
  for (WorkerEnvironment& rank : *ranks) {
    WorkerLaunch launch;
    launch.rank = rank.rank;
    launch.process.argv = {*worker, "--shard_dir=" + shard_dir, "--tokenizer_path=" + fs::absolute(tokenizer).string()};
    launch.process.argv.insert(launch.process.argv.end(), job_flags.begin(), job_flags.end());
    // A clean, explicit environment: nothing from our shell leaks in.
    rank.token = *token;
    if (rank.rank == 0 && store_listener.valid()) {
      launch.process.inherit_fd = store_listener.fd();
      rank.listen_fd = store_listener.fd();
    }
    for (const auto& [name, value] : WorkerEnvironmentVariables(rank)) launch.process.env.push_back(name + "=" + value);
    launch.process.argv.push_back("--device=" + device);
    if (!gpus.empty()) launch.process.env.push_back("CUDA_VISIBLE_DEVICES=" + gpus[rank.local_rank]);
    // The API key reaches rank 0 in its environment, never on a command line.
    if (rank.rank == 0 && !FLAGS_api_key.empty()) {
      launch.process.env.push_back(absl::StrCat(kApiKeyVariable, "=", FLAGS_api_key));
    }
    launches.push_back(std::move(launch));
  }
  SupervisorOptions supervise;
  supervise.log_dir = FLAGS_log_dir.empty() ? RunLogDir(world.node_rank) : FLAGS_log_dir;
  const std::string summary_path = supervise.log_dir + "/summary.json";
  std::error_code ignored;
  fs::remove(summary_path, ignored);
  for (WorkerLaunch& launch : launches) launch.process.argv.push_back("--summary_file=" + summary_path);
  supervise.grace = std::chrono::seconds(FLAGS_grace_period);
  // A server drains before it exits: its grace covers the drain.
  if (serving) {
    supervise.grace = std::max<std::chrono::milliseconds>(supervise.grace, std::chrono::seconds(FLAGS_drain_timeout + 10));
  }
  if (chatting) {
    ChatSessionOptions chat;
    chat.model = FLAGS_served_model_name;
    chat.api_key = FLAGS_api_key;
    chat.system_prompt = FLAGS_system_prompt;
    chat.temperature = FLAGS_temperature;
    chat.top_p = FLAGS_top_p;
    chat.max_tokens = FLAGS_max_gen_len;
    return RunChatSession(launches, supervise, chat);
  }
  const auto job_start = std::chrono::steady_clock::now();
  absl::StatusOr<JobOutcome> outcome = SuperviseJob(launches, supervise);
  if (!outcome.ok()) return Fail(outcome.status().message());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - job_start).count();
  if (outcome->interrupted && serving && outcome->failed_rank < 0 && outcome->all_exited_cleanly) {
    std::fprintf(stderr, "launcher: the server drained and stopped after %.1f s; logs in %s\n", seconds,
                 supervise.log_dir.c_str());
    return 0;
  }
  if (outcome->interrupted) {
    std::fprintf(stderr, "launcher: interrupted; stopped all %zu workers\n", launches.size());
    return 130;
  }
  if (!outcome->success) {
    const std::string last = LastLogLine(outcome->failed_log);
    return Fail(absl::StrFormat("rank %d failed (%s)%s; its log: %s", outcome->failed_rank,
                                outcome->failed_exit.Describe(), last.empty() ? "" : ": " + last,
                                outcome->failed_log));
  }
  std::string numbers;
  if (std::ifstream summary(summary_path); summary) {  // Written by rank 0, when it runs on this node.
    const nlohmann::json j = nlohmann::json::parse(summary, nullptr, false);
    if (!j.is_discarded()) {
      numbers = absl::StrFormat(", shards loaded in %.2f s, %d tokens generated at %.1f tokens/s",
                                j.value("load_seconds", 0.0), j.value("tokens", 0), j.value("tokens_per_second", 0.0));
    }
  }
  std::fprintf(stderr, "launcher: %d rank(s) on %d node(s) done in %.1f s (checkpoint preparation %.1f s%s); logs in %s\n",
               world_size, world.nnodes, seconds, std::chrono::duration<double>(job_start - prepare_start).count(),
               numbers.c_str(), supervise.log_dir.c_str());
  return 0;
}

}  // namespace
}  // namespace llama

int main(int argc, char** argv) {
  llama::HandleHelpAndVersion(argc, argv, "launcher", llama::kLauncherUsage, llama::LauncherFlagGroups());
  gflags::SetUsageMessage(llama::kLauncherUsage);
  gflags::ParseCommandLineFlags(&argc, &argv, /*remove_flags=*/true);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  std::vector<std::string> extra(argv + 1, argv + argc);
  extra.erase(std::remove(extra.begin(), extra.end(), "--"), extra.end());
  return llama::Run(extra);
}
