#include "launcher/launch.h"

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

#include <glog/logging.h>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/allowed_cpus.h"
#include "base/net.h"
#include "base/status_macros.h"
#include "checkpoint/converter.h"
#include "checkpoint/gguf_checkpoint.h"
#include "launcher/chat.h"
#include "launcher/demo.h"
#include "launcher/download_command.h"
#include "launcher/launch_plan.h"
#include "launcher/launcher_flags.h"
#include "launcher/preflight.h"
#include "launcher/replica_registry.h"
#include "launcher/replica_set.h"
#include "launcher/sbatch_command.h"
#include "launcher/serve_front_end.h"
#include "launcher/shard_preparation.h"
#include "launcher/supervisor.h"
#include "launcher/world.h"
#include "ops/device.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_location.h"
#include "worker/serving_flags.h"

namespace llama {

namespace fs = std::filesystem;

namespace {

std::string SelfPath() {
  std::error_code error;
  return fs::read_symlink("/proc/self/exe", error).string();
}

// //worker next to us: in our runfiles (bazel run), in bazel-bin, or in the
// same folder.
absl::StatusOr<std::string> FindWorker(const std::string& given) {
  if (!given.empty()) return given;
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

// Our folder in the user's cache: $XDG_CACHE_HOME/llama2-cpp, else
// ~/.cache/llama2-cpp (/tmp without a HOME).
std::string CacheDir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  const std::string root = xdg != nullptr && *xdg == '/' ? xdg : absl::StrCat(home != nullptr ? home : "/tmp", "/.cache");
  return absl::StrCat(root, "/llama2-cpp");
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

absl::StatusOr<std::string> JobToken(const std::string& token_file, bool single_node) {
  if (!token_file.empty()) {
    std::ifstream in(token_file);
    std::stringstream text;
    text << in.rdbuf();
    const std::string token(absl::StripAsciiWhitespace(text.str()));
    if (!in || token.empty()) {
      return absl::InvalidArgumentError(absl::StrFormat("--token_file \"%s\": missing or empty", token_file));
    }
    return token;
  }
  if (const char* token = std::getenv("RENDEZVOUS_TOKEN"); token != nullptr && *token != '\0') return std::string(token);
  if (single_node) return RandomToken();
  return absl::InvalidArgumentError(
      "a job across nodes needs a secret shared by all nodes: set RENDEZVOUS_TOKEN or --token_file on every node");
}


// Node 0 binds the store's port here, into `world`'s port when it was 0.
// The store holds the job's token exchange: it listens only where the
// other ranks reach it (loopback for a one-node job), not on every network.
absl::StatusOr<net::Socket> BindStore(const LaunchPlan& plan, WorldOptions& world) {
  absl::StatusOr<std::string> listen_address =
      plan.store_listen_all ? absl::StatusOr<std::string>("0.0.0.0") : net::AddressReaching(world.master_addr);
  if (!listen_address.ok()) {
    return Annotate(listen_address.status(), plan.master_addr_origin);
  }
  absl::StatusOr<net::Socket> listener = net::Listen(*listen_address, world.master_port);
  if (absl::IsFailedPrecondition(listener.status())) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s is already in use on this node; pick another --master_port", plan.master_port_origin));
  }
  RETURN_IF_ERROR(listener.status());
  ASSIGN_OR_RETURN(world.master_port, net::LocalPort(*listener));
  return listener;
}

// The checkpoint the plan names: the first model downloaded, or the demo's
// (then also its tokenizer and, unless the job has its own, its prompts).
absl::Status ObtainCheckpoint(LaunchPlan& plan) {
  if (plan.download) {
    RETURN_IF_ERROR(RunDownloadCommand());
    ASSIGN_OR_RETURN(plan.ckpt_dir, DownloadedCheckpointDir(plan.download_models, plan.download_target_dir));
  }
  if (!plan.demo) return absl::OkStatus();
  ASSIGN_OR_RETURN(const DemoCheckpoint made, PrepareDemoCheckpoint(plan.demo_dir));
  plan.ckpt_dir = made.ckpt_dir;
  plan.tokenizer_path = made.tokenizer_path;
  if (plan.demo_prompts) plan.job.prompts_file = made.prompts_file;
  std::fprintf(stderr,
               "launcher: demo job: a small Llama 2 checkpoint with RANDOM weights in %s (no download);\n"
               "          the completions are meaningless text, produced by the real pipeline.\n",
               plan.ckpt_dir.c_str());
  return absl::OkStatus();
}

// This node's shards for the job (`convert` without its out_dir),
// converted or found up to date (or, on the other nodes, waited for); their
// folder.
absl::StatusOr<std::string> PrepareJobShards(const LaunchPlan& plan, ConvertOptions convert, const std::string& token) {
  if (convert.out_dir.empty()) {
    ASSIGN_OR_RETURN(const ShardLocation location, ChooseShardDir(convert, plan.shard_cache_dir));
    if (!location.note.empty()) std::fprintf(stderr, "launcher: %s\n", location.note.c_str());
    if (location.as_is) {
      std::fprintf(stderr, "launcher: running the shards in %s as they are\n", location.dir.c_str());
      return location.dir;
    }
    convert.out_dir = location.dir;
  }
  ShardPreparation preparation = plan.preparation;
  preparation.convert = convert;
  preparation.job_token = token;
  ASSIGN_OR_RETURN(const ConvertResult converted, PrepareShards(preparation));
  std::fprintf(stderr, "launcher: %s %s\n", converted.up_to_date ? "shards up to date in" : "converted to",
               convert.out_dir.c_str());
  return convert.out_dir;
}

// True when the job formats dialogs (chat, a server, a dialogs file).
bool FormatsDialogs(const LaunchPlan& plan) {
  return plan.command == LaunchCommand::kServe || plan.command == LaunchCommand::kChat ||
         !plan.job.dialogs_file.empty();
}

// A GGUF checkpoint's tokenizer, unless --tokenizer_path names one: its
// metadata written as a tokenizer.model beside the shards' folder
// (<file>.gguf.shards/tp<N>.tokenizer.model), for the checks here and the
// workers. A job that formats dialogs needs its chat template to be Llama
// 2's or Llama 3's, or --chat_format, and that format to be the
// tokenizer's.
absl::Status UseGgufTokenizer(const std::string& gguf, LaunchPlan& plan) {
  if (plan.tokenizer_path.empty()) {
    ConvertOptions convert = plan.convert;
    convert.ckpt_dir = plan.ckpt_dir;
    std::string shard_dir = convert.out_dir;
    if (shard_dir.empty()) {
      ASSIGN_OR_RETURN(const ShardLocation location, ChooseShardDir(convert, plan.shard_cache_dir));
      shard_dir = location.dir;
    }
    plan.tokenizer_path = shard_dir + ".tokenizer.model";
    RETURN_IF_ERROR(WriteGgufTokenizer(gguf, plan.tokenizer_path));
  }
  if (!FormatsDialogs(plan)) return absl::OkStatus();
  std::optional<ChatTemplateKind> format;
  if (!plan.chat_format.empty()) {
    ASSIGN_OR_RETURN(format, ParseChatFormatFlag(plan.chat_format));
  } else {
    ASSIGN_OR_RETURN(format, GgufChatTemplate(gguf));
  }
  if (!format.has_value()) return absl::OkStatus();  // No template: the tokenizer's own format.
  ASSIGN_OR_RETURN(const std::unique_ptr<Tokenizer> tokenizer, Tokenizer::Load(plan.tokenizer_path));
  const bool llama3 = tokenizer->family() == Tokenizer::Family::kTiktoken;
  if ((*format == ChatTemplateKind::kLlama3) != llama3) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: the chat format is %s but the tokenizer is %s; chats are formatted in the tokenizer's own format (%s)",
        gguf, *format == ChatTemplateKind::kLlama3 ? "Llama 3's" : "Llama 2's",
        llama3 ? "Llama 3's BPE" : "SentencePiece (Llama 2's)", llama3 ? "--chat_format=llama3" : "--chat_format=llama2"));
  }
  return absl::OkStatus();
}

// Everything about the model and the job that needs no weights: the
// checkpoint's folder, its tokenizer (found unless given), its config, the
// tokenizer against its vocabulary and the job's inputs as the worker will
// read and tokenize them; the config.
absl::StatusOr<ModelConfig> CheckModelAndInputs(LaunchPlan& plan) {
  RETURN_IF_ERROR(CheckCheckpointFolder(plan.ckpt_dir, "ckpt_dir"));
  if (const std::optional<std::string> gguf = GgufCheckpointFile(plan.ckpt_dir); gguf.has_value()) {
    RETURN_IF_ERROR(UseGgufTokenizer(*gguf, plan));
  } else if (plan.tokenizer_path.empty()) {
    ASSIGN_OR_RETURN(plan.tokenizer_path, FindTokenizerFile(plan.ckpt_dir));
  }
  ConvertOptions convert = plan.convert;
  convert.ckpt_dir = plan.ckpt_dir;
  // A checkpoint that cannot be read is best explained by its checklist.
  convert.verify_checklist = fs::exists(fs::path(plan.ckpt_dir) / "checklist.chk");
  ASSIGN_OR_RETURN(const ModelConfig model, ReadCheckpointConfig(convert));
  std::vector<std::string> warnings;
  RETURN_IF_ERROR(CheckJobInputs({plan.ckpt_dir, model.vocab_size, plan.tokenizer_path, model.context_length()},
                                 plan.job, &warnings));
  for (const std::string& warning : warnings) std::fprintf(stderr, "launcher: warning: %s\n", warning.c_str());
  return model;
}

// --draft_ckpt_dir's checkpoint, before anything is converted: the folder,
// its config, and its tokenizer (a GGUF's written beside its shards' folder,
// as the model's) against the model's (CheckDraftModel).
absl::Status CheckDraftCheckpoint(const LaunchPlan& plan, const ModelConfig& model) {
  ConvertOptions draft = *plan.draft_convert;
  const auto named = [&](const absl::Status& status) {
    return absl::Status(status.code(), absl::StrCat("--draft_ckpt_dir=", draft.ckpt_dir, ": ", status.message()));
  };
  RETURN_IF_ERROR(CheckCheckpointFolder(draft.ckpt_dir, "draft_ckpt_dir"));
  draft.verify_checklist = fs::exists(fs::path(draft.ckpt_dir) / "checklist.chk");
  const absl::StatusOr<ModelConfig> config = ReadCheckpointConfig(draft);
  if (!config.ok()) return named(config.status());
  PreflightModel drafted{draft.ckpt_dir, config->vocab_size, "", config->context_length()};
  if (const std::optional<std::string> gguf = GgufCheckpointFile(draft.ckpt_dir); gguf.has_value()) {
    ASSIGN_OR_RETURN(const ShardLocation location, ChooseShardDir(draft, plan.shard_cache_dir));
    drafted.tokenizer_path = location.dir + ".tokenizer.model";
    if (absl::Status written = WriteGgufTokenizer(*gguf, drafted.tokenizer_path); !written.ok()) return named(written);
  } else if (absl::StatusOr<std::string> found = FindTokenizerFile(draft.ckpt_dir); found.ok()) {
    drafted.tokenizer_path = *found;
  } else if (!absl::IsNotFound(found.status())) {
    return named(found.status());
  }
  std::vector<std::string> warnings;
  RETURN_IF_ERROR(CheckDraftModel({plan.ckpt_dir, model.vocab_size, plan.tokenizer_path, model.context_length()},
                                  drafted, &warnings));
  for (const std::string& warning : warnings) std::fprintf(stderr, "launcher: warning: %s\n", warning.c_str());
  return absl::OkStatus();
}

// The model's files for the workers: the checkpoint obtained, everything
// that needs no weights checked (CheckModelAndInputs, a --draft_ckpt_dir
// draft, the log folder, the worker binary), then the shards prepared,
// which can take minutes.
absl::Status PrepareModel(LaunchPlan& plan, PreparedJob& prepared) {
  RETURN_IF_ERROR(ObtainCheckpoint(plan));
  ASSIGN_OR_RETURN(const ModelConfig model, CheckModelAndInputs(plan));
  if (plan.draft_convert.has_value() && !plan.draft_convert->ckpt_dir.empty()) {
    RETURN_IF_ERROR(CheckDraftCheckpoint(plan, model));
  }
  RETURN_IF_ERROR(CheckLogFolder(plan.supervise.log_dir));
  ASSIGN_OR_RETURN(prepared.worker_binary, FindWorker(plan.worker_binary));
  ConvertOptions convert = plan.convert;
  convert.ckpt_dir = plan.ckpt_dir;
  convert.verify_checklist = fs::exists(fs::path(plan.ckpt_dir) / "checklist.chk");
  ASSIGN_OR_RETURN(prepared.shard_dir, PrepareJobShards(plan, convert, prepared.token));
  if (plan.draft_convert.has_value()) {
    ConvertOptions draft = *plan.draft_convert;
    if (draft.ckpt_dir.empty()) draft.ckpt_dir = plan.ckpt_dir;
    draft.verify_checklist = fs::exists(fs::path(draft.ckpt_dir) / "checklist.chk");
    ASSIGN_OR_RETURN(prepared.draft_shard_dir, PrepareJobShards(plan, draft, prepared.token));
  }
  prepared.tokenizer_path = plan.tokenizer_path;
  return absl::OkStatus();
}

// What every node of a submitted job would check first, checked before the
// queue wait with a local run's messages: the job's flags as the nodes'
// launchers plan them (its flags are this process's now: RunSbatchCommand
// applied them), and, for a checkpoint that is already there (not the
// demo's, not a download) unless this is a dry run (its paths may be
// another machine's), CheckModelAndInputs and the world size (nodes x
// workers per node) against the model's heads. The nodes' GPUs are the ones
// the job asks for, whatever this machine (a login node) has.
absl::Status CheckSubmittedJob(const SubmittedJob& job) {
  std::vector<std::string> words;
  if (job.serve) words.push_back("serve");
  LaunchContext node = CurrentContext();
  node.visible_gpus.clear();
  for (int gpu = 0; gpu < job.gpus_per_node; ++gpu) node.visible_gpus.push_back(std::to_string(gpu));
  ASSIGN_OR_RETURN(LaunchPlan plan, PlanLaunch(words, LauncherFlagsFromCommandLine({}), node));
  if (plan.demo || plan.download || job.dry_run) return absl::OkStatus();
  ASSIGN_OR_RETURN(const ModelConfig model, CheckModelAndInputs(plan));
  // Replicas split the model over a node's workers alone.
  const int world = plan.data_parallel_size > 1 ? job.workers_per_node : job.nodes * job.workers_per_node;
  if (absl::Status fits = CheckWorldSize(model, world); !fits.ok()) {
    return absl::InvalidArgumentError(absl::StrFormat("sbatch: --nodes=%d x %d worker(s) per node: %s", job.nodes,
                                                      job.workers_per_node, fits.message()));
  }
  return absl::OkStatus();
}

// The server's --port on node 0, tried before minutes of converting and
// loading: rank 0 would find it taken only then. (Taken in between, rank 0
// still says so when it listens.)
absl::Status CheckServePort(const LaunchPlan& plan) {
  if (plan.command != LaunchCommand::kServe || plan.world.node_rank != 0 || plan.job.port == 0) {
    return absl::OkStatus();
  }
  const absl::StatusOr<net::Socket> probe = net::Listen(plan.job.host, plan.job.port);
  if (probe.ok()) return absl::OkStatus();
  const std::string why = absl::IsFailedPrecondition(probe.status())
                              ? "is already in use (another server or program holds it)"
                              : absl::StrCat("cannot be listened on: ", probe.status().message());
  return absl::FailedPreconditionError(
      absl::StrFormat("--port=%d on --host=%s %s; pick another --port or --host", plan.job.port, plan.job.host, why));
}

// The job's end, as the user reads it: the server's drain, an interrupt
// (Cancelled), the first failed rank with its last log line, or the numbers.
absl::Status ReportOutcome(const LaunchPlan& plan, const JobOutcome& outcome, size_t workers, double seconds,
                           double preparation_seconds) {
  if (outcome.interrupted && plan.command == LaunchCommand::kServe && outcome.failed_rank < 0 &&
      outcome.all_exited_cleanly) {
    std::fprintf(stderr, "launcher: the server drained and stopped %.1f s after the signal (up %.1f s); logs in %s\n",
                 outcome.stop_seconds, seconds, plan.supervise.log_dir.c_str());
    return absl::OkStatus();
  }
  if (outcome.interrupted) {
    return absl::CancelledError(absl::StrFormat("interrupted; stopped all %zu workers", workers));
  }
  if (!outcome.success) {
    const std::string last = LastLogLine(outcome.failed_log);
    return absl::InternalError(absl::StrFormat("rank %d failed (%s)%s; its log: %s", outcome.failed_rank,
                                               outcome.failed_exit.Describe(), last.empty() ? "" : ": " + last,
                                               outcome.failed_log));
  }
  std::string numbers;
  if (std::ifstream summary(plan.summary_path); summary) {  // Written by rank 0, when it runs on this node.
    const nlohmann::json j = nlohmann::json::parse(summary, nullptr, false);
    if (!j.is_discarded()) {
      numbers = absl::StrFormat(", shards loaded in %.2f s, %d tokens generated at %.1f tokens/s",
                                j.value("load_seconds", 0.0), j.value("tokens", 0), j.value("tokens_per_second", 0.0));
      if (const int64_t guessed = j.value("speculative_proposed_tokens", int64_t{0}); guessed > 0) {
        absl::StrAppend(&numbers, absl::StrFormat(", %d of %d speculative guesses kept (%.2f tokens per request step)",
                                                  j.value("speculative_accepted_tokens", int64_t{0}), guessed,
                                                  j.value("tokens_per_request_step", 1.0)));
      }
    }
  }
  std::fprintf(stderr, "launcher: %d rank(s) on %d node(s) done in %.1f s (checkpoint preparation %.1f s%s); logs in %s\n",
               plan.world_size, plan.world.nnodes, seconds, preparation_seconds, numbers.c_str(),
               plan.supervise.log_dir.c_str());
  return absl::OkStatus();
}

// launcher serve --data_parallel_size: this node's share of the replicas,
// each started with a store, token, log folder and share of the CPUs or
// GPUs of its own; on node 0 the front end on --host:--port (and, across
// nodes, the registry where the other nodes say where theirs serve, on
// `store`), on the others a publisher to that registry.
absl::Status ServeReplicas(const LaunchPlan& plan, const PreparedJob& prepared, net::Socket store) {
  const int local = plan.replicas_per_node, ranks = plan.world.nproc_per_node;
  const int first = plan.world.node_rank * local;
  ReplicaSetOptions options;
  options.replicas = local;
  options.first_index = first;
  options.max_restarts = plan.max_restarts;
  options.supervise = plan.supervise;
  options.model = plan.job.served_model_name;
  std::unique_ptr<ServeFrontEnd> front;
  std::unique_ptr<ReplicaRegistry> registry;
  std::unique_ptr<ReplicaPublisher> publisher;
  ReplicaDirectory* directory = nullptr;
  if (plan.world.node_rank == 0) {
    ASSIGN_OR_RETURN(const ServingHttpOptions http, ServingHttpOptionsFromFlags(plan.job));
    FrontEndOptions front_options;
    front_options.host = plan.job.host;
    front_options.port = plan.job.port;
    front_options.replicas = plan.data_parallel_size;
    front_options.routing.policy = plan.routing;
    front_options.limits = http.limits;
    front_options.access_log = http.access_log;
    front_options.api_keys = http.api_keys;
    front = std::make_unique<ServeFrontEnd>(front_options);
    RETURN_IF_ERROR(front->Start());
    if (plan.world.nnodes > 1) {
      std::vector<int> remote;
      for (int r = local; r < plan.data_parallel_size; ++r) remote.push_back(r);
      ASSIGN_OR_RETURN(registry, ReplicaRegistry::Start(std::move(store), prepared.token, plan.world.master_addr,
                                                        std::move(remote), *front, absl::Milliseconds(250)));
    }
    directory = front.get();
    options.wait_for_signal = plan.world.nnodes > 1;
    std::string host = plan.job.host;
    if (char name[256] = {}; (host == "0.0.0.0" || host == "::") && gethostname(name, sizeof name - 1) == 0) {
      host = name;
    }
    options.url = absl::StrFormat("http://%s:%d/v1", host, front->port());
    options.about = absl::StrFormat("%d replicas of %d rank(s) on %d node(s), --routing=%s", plan.data_parallel_size,
                                    ranks, plan.world.nnodes, RoutingPolicyName(plan.routing));
    std::fprintf(stderr, "launcher: starting %s; /health on http://%s:%d/health says when they are up\n",
                 options.about.c_str(), host.c_str(), front->port());
  } else {
    // This node's replicas serve where node 0 reaches them.
    ASSIGN_OR_RETURN(options.host, net::AddressReaching(plan.world.master_addr));
    ASSIGN_OR_RETURN(publisher, ReplicaPublisher::Connect(plan.world.master_addr, plan.world.master_port,
                                                          prepared.token, plan.world.node_rank,
                                                          net::After(std::chrono::seconds(plan.job.rendezvous_timeout))));
    directory = publisher.get();
    options.stop_when = &publisher->lost();
    std::fprintf(stderr, "launcher: starting replicas %d to %d of %d; node 0 routes to them\n", first,
                 first + local - 1, plan.data_parallel_size);
  }
  const auto start = [&](int replica) -> absl::StatusOr<ReplicaStart> {
    LaunchPlan own = plan;
    own.job.host = options.host;
    own.job.port = 0;
    own.summary_path = absl::StrFormat("%s/replica%d.summary.json", plan.supervise.log_dir, first + replica);
    if (!plan.gpus.empty()) {
      own.gpus.assign(plan.gpus.begin() + replica * ranks, plan.gpus.begin() + (replica + 1) * ranks);
    }
    ReplicaStart started;
    ASSIGN_OR_RETURN(started.store, net::Listen("127.0.0.1", 0));
    WorldOptions world = plan.world;
    world.nnodes = 1;
    world.node_rank = 0;
    world.master_addr = "127.0.0.1";
    ASSIGN_OR_RETURN(world.master_port, net::LocalPort(started.store));
    PreparedJob job = prepared;
    job.store_fd = started.store.fd();
    job.token = RandomToken();
    ASSIGN_OR_RETURN(job.ranks, LocalRanks(world));
    started.launches = WorkerLaunches(own, job);
    if (!plan.replica_cpus.empty()) {
      for (WorkerLaunch& launch : started.launches) launch.process.cpus = plan.replica_cpus[replica];
    }
    return started;
  };
  const absl::Status served = RunReplicaSet(*directory, options, start, [&] {
    if (front != nullptr) front->SetDraining();
  });
  if (front != nullptr) front->WaitForAnswers(absl::Seconds(plan.job.drain_timeout));
  registry.reset();
  if (front != nullptr) front->Stop();
  return served;
}

}  // namespace

// What planning reads from this process and machine.
LaunchContext CurrentContext() {
  LaunchContext context;
  context.getenv = [](const char* name) { return std::getenv(name); };
  for (char** entry = environ; *entry != nullptr; ++entry) context.environment.emplace_back(*entry);
  context.visible_gpus = VisibleGpus();
  context.built_with_cuda = BuiltWithCuda();
  context.cache_dir = CacheDir();
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
  context.run_stamp = stamp;
  context.pid = getpid();
  context.chat_api_key = RandomToken();
  context.allowed_cpus = AllowedCpus();
  return context;
}

absl::Status Execute(LaunchPlan plan) {
  if (plan.command == LaunchCommand::kDownload) return RunDownloadCommand();
  if (plan.command == LaunchCommand::kSbatch) {
    return RunSbatchCommand(SelfPath(),
                            {plan.sbatch_args, plan.worker_environment, plan.sbatch_options, CheckSubmittedJob});
  }
  PreparedJob prepared;
  net::Socket store_listener;
  WorldOptions world = plan.world;
  if (plan.bind_store) {
    ASSIGN_OR_RETURN(store_listener, BindStore(plan, world));
    prepared.store_fd = store_listener.fd();
  }
  if (plan.data_parallel_size == 1) {  // Replicas have worlds of their own (ServeReplicas).
    ASSIGN_OR_RETURN(prepared.ranks, LocalRanks(world));
  }
  ASSIGN_OR_RETURN(prepared.token, JobToken(plan.token_file, plan.world.nnodes == 1));
  RETURN_IF_ERROR(CheckServePort(plan));
  const auto prepare_start = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(PrepareModel(plan, prepared));
  if (plan.data_parallel_size > 1) return ServeReplicas(plan, prepared, std::move(store_listener));
  const std::vector<WorkerLaunch> launches = WorkerLaunches(plan, prepared);
  std::error_code ignored;
  fs::remove(plan.summary_path, ignored);
  if (plan.command == LaunchCommand::kChat) return RunChatSession(launches, plan.supervise, plan.chat);
  const auto job_start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(const JobOutcome outcome, SuperviseJob(launches, plan.supervise));
  const auto seconds = [](auto from, auto to) { return std::chrono::duration<double>(to - from).count(); };
  return ReportOutcome(plan, outcome, launches.size(), seconds(job_start, std::chrono::steady_clock::now()),
                       seconds(prepare_start, job_start));
}

}  // namespace llama
