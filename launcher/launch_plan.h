// What a launcher run will do, decided from its flags and command words
// before any work: the subcommand, the ranks and nodes, the device, where
// the model comes from (a download, the demo, a checkpoint) and its
// conversion, the supervision, and, once the model is prepared, each
// worker's command line and environment. Pure: no file, socket or process
// is touched (launcher/main.cc's Execute does the work), so tests can check
// a plan.

#ifndef LLAMA_LAUNCHER_LAUNCH_PLAN_H_
#define LLAMA_LAUNCHER_LAUNCH_PLAN_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/converter.h"
#include "launcher/chat.h"
#include "launcher/launcher_flags.h"
#include "launcher/replica_router.h"
#include "launcher/shard_preparation.h"
#include "launcher/supervisor.h"
#include "launcher/world.h"
#include "worker/collectives/environment.h"
#include "worker/job_flags.h"

namespace llama {

enum class LaunchCommand {
  kJob,       // Text or chat completion over the prompts.
  kServe,     // The OpenAI API.
  kChat,      // A terminal chat with a private server.
  kDownload,  // `launcher download`.
  kSbatch,    // `launcher sbatch`.
};

// What planning reads from outside the command line.
struct LaunchContext {
  // The environment (SLURM's variables).
  std::function<const char*(const char*)> getenv = [](const char*) -> const char* { return nullptr; };
  std::vector<std::string> environment;  // All of it, "NAME=value", which the workers inherit.
  std::vector<std::string> visible_gpus;  // CUDA_VISIBLE_DEVICES, else the driver's list.
  bool built_with_cuda = false;
  std::string cache_dir;       // Our folder in the user's cache: <cache>/llama2-cpp.
  std::string run_stamp;       // The local time, for this run's log folder ("20261201-231000").
  int pid = 0;                 // Also for the log folder.
  std::string chat_api_key;    // A fresh secret for launcher chat's private server.
  std::vector<int> allowed_cpus;  // This process's affinity mask, for the replicas' shares.
};

struct LaunchPlan {
  LaunchCommand command = LaunchCommand::kJob;
  std::vector<std::string> sbatch_args;  // kSbatch: the job's arguments, after "--".
  std::vector<std::string> sbatch_options;  // kSbatch: every --sbatch_arg.

  // The job's flags as every worker gets them: set for serve and chat
  // (--serve, and chat's loopback host, any port and random key) and for
  // the demo (its prompts unless the job has its own, 32 tokens each).
  JobFlags job;
  WorldOptions world;     // master_port 0: node 0 binds any free port.
  // Where world.master_addr came from, for errors: "--master_addr=h", or
  // the first node of SLURM's node list.
  std::string master_addr_origin;
  // Where world.master_port came from, for errors: "--master_port=N", or
  // "the job's port N (from SLURM_JOB_ID)".
  std::string master_port_origin;
  int world_size = 1;
  bool bind_store = false;        // Node 0 binds the rendezvous store's port and hands it to rank 0.
  bool store_listen_all = false;  // On every interface, not only the one that reaches master_addr.
  std::string token_file;         // The job's secret; empty: $RENDEZVOUS_TOKEN, else a fresh one on one node.
  std::string device;             // "cpu" or "cuda".
  std::vector<std::string> gpus;  // CUDA: each local rank's CUDA_VISIBLE_DEVICES.
  // Every worker's environment before the launcher's own variables: the
  // launcher's, then each --worker_env ("NAME=value", a name once).
  std::vector<std::string> worker_environment;

  // The model: downloaded first, the demo's, or the checkpoint folder.
  bool download = false;        // Fetch --models into --target_dir, then run the first one.
  std::string download_models;
  std::string download_target_dir;
  bool demo = false;            // No checkpoint: the demo's, made in demo_dir.
  std::string demo_dir;
  bool demo_prompts = false;    // The job takes the demo's prompts file.
  std::string ckpt_dir;         // Empty until the download or the demo decides it.
  std::string tokenizer_path;   // Empty: looked up in or beside ckpt_dir.
  std::string chat_format;      // --chat_format: for a GGUF whose chat template is not recognised.
  ConvertOptions convert;       // out_dir empty: chosen under shard_cache_dir.
  // --draft_ckpt_dir or --draft_weights_dtype: the draft's conversion (one
  // rank, in --draft_weights_dtype or the job's type, out_dir chosen as the
  // job's; ckpt_dir --draft_ckpt_dir's, empty for the model's own), or unset.
  std::optional<ConvertOptions> draft_convert;
  std::string shard_cache_dir;
  ShardPreparation preparation;  // All but its convert and job_token.
  std::string worker_binary;    // Empty: found next to the launcher.

  SupervisorOptions supervise;
  std::string summary_path;     // Rank 0's numbers (--summary_file).

  // launcher serve --data_parallel_size: replicas of world.nproc_per_node
  // ranks each, replicas_per_node on every node (each binds its own store;
  // bind_store is node 0's registry across nodes, and world_size a
  // replica's).
  int data_parallel_size = 1;
  int replicas_per_node = 1;  // data_parallel_size / world.nnodes: each replica on one node.
  RoutingPolicy routing = RoutingPolicy::kPrefix;
  int max_restarts = 3;
  std::vector<std::vector<int>> replica_cpus;  // CPU: each replica's CPUs; CUDA: empty.
  ChatSessionOptions chat;      // kChat.
};

// The plan for `words` (the command words left after the flags: "serve",
// "chat", "download", "sbatch"). Errors are the launcher's messages for
// bad flags, before any work.
absl::StatusOr<LaunchPlan> PlanLaunch(std::vector<std::string> words, const LauncherFlags& flags,
                                      const LaunchContext& context);

// The checkpoint folder `launcher --models=...` runs after downloading: the
// first model's.
absl::StatusOr<std::string> DownloadedCheckpointDir(const std::string& models, const std::string& target_dir);

// What the plan's effects produced, for the workers' command lines.
struct PreparedJob {
  std::string worker_binary;
  std::string shard_dir;
  std::string draft_shard_dir;  // --draft_ckpt_dir's or --draft_weights_dtype's, or empty.
  std::string tokenizer_path;
  std::string token;             // The job's secret.
  int store_fd = -1;             // Node 0: the rendezvous store's socket, for rank 0.
  std::vector<WorkerEnvironment> ranks;  // This node's, in local_rank order.
};

// Each local rank's process: its command line (the job's flags, the node's
// shards, tokenizer and device, the summary file) and its environment: the
// plan's worker_environment without any variable the launcher sets itself
// (the rank's variables, its GPU, the API key, which only rank 0 gets and
// never on a command line), then those.
// Whether the launcher sets `name` in a worker's environment itself (with
// `gpus`, CUDA_VISIBLE_DEVICES too), so that the worker does not inherit it.
bool LauncherSetsVariable(const std::string& name, bool gpus);

std::vector<WorkerLaunch> WorkerLaunches(const LaunchPlan& plan, const PreparedJob& prepared);

}  // namespace llama

#endif  // LLAMA_LAUNCHER_LAUNCH_PLAN_H_
