// The launcher's own flags, once: a table (as worker/job_flags.h's) that
// generates their definitions (launcher/main.cc), LauncherFlags' fields
// and defaults, and their --help groups (launcher/usage.cc).

#ifndef LLAMA_LAUNCHER_LAUNCHER_FLAGS_H_
#define LLAMA_LAUNCHER_LAUNCHER_FLAGS_H_

#include <string>
#include <vector>

#include "worker/job_flags.h"

namespace llama {

// Where --help lists a launcher flag.
enum class LauncherFlagGroup {
  kModel,       // The checkpoint.
  kConversion,  // What its shards hold.
  kChat,
  kTopology,    // Ranks and nodes, torchrun's flags and ours.
  kReplicas,    // launcher serve --data_parallel_size.
  kRunning,
};

}  // namespace llama

// X(gflags type, name, default, LauncherFlagGroup, help); --help lists a
// group's flags in this order.
#define LLAMA_LAUNCHER_FLAGS(X) \
  X(string, ckpt_dir, "", kModel, \
    "Meta's checkpoint folder (consolidated.NN.pth, params.json), a Hugging Face one (config.json, " \
    "safetensors) or a GGUF file (llama.cpp's; its tokenizer comes with it). Empty: the demo job.") \
  X(string, chat_format, "", kModel, \
    "A GGUF checkpoint whose tokenizer.chat_template is neither Llama 2's nor Llama 3's: chat in llama2 or " \
    "llama3 format anyway (it must be its tokenizer's: SentencePiece or Llama 3's BPE).") \
  X(string, weights_dtype, "", kConversion, \
    "Convert the weights to bf16, fp16, fp32, int8 (8-bit blocks for the linear layers, CPU only) or q4_k " \
    "(llama.cpp's Q4_K_M mix of 4- and 6-bit K-quants for the linear layers, CPU only; a Q4_K_M GGUF's types " \
    "kept). " \
    "Default: as stored. Shards of another type live in their own folder (shards/tp<N>-<type>).") \
  X(string, draft_weights_dtype, "", kConversion, \
    "Speculative decoding by self-speculation, on CPUs: the checkpoint converted again, for one rank, to " \
    "q4_k or int8 (shards/tp1-q4_k or tp1-q8_0, kept like the job's shards) drafts for the model on rank 0 " \
    "(the workers' --draft_shard_dir). Needs no second model; the answers stay those of plain decoding, " \
    "bit for bit. With --draft_ckpt_dir: that model's type (any --weights_dtype takes).") \
  X(string, draft_ckpt_dir, "", kConversion, \
    "Speculative decoding with a smaller model that speaks the model's tokenizer (Llama 3.2 1B for Llama 3.1 " \
    "8B): its checkpoint (Meta's, Hugging Face's or a GGUF file), converted for one rank like the model (to " \
    "--weights_dtype, or --draft_weights_dtype) beside its own files, drafts for the model on rank 0 (the " \
    "workers' --draft_shard_dir). Refused at start, before any conversion, unless its tokenizer is the " \
    "model's; the answers stay those of plain decoding, bit for bit.") \
  X(string, system_prompt, "", kChat, \
    "launcher chat: the system message that opens the dialog.") \
  X(int32, nproc_per_node, 1, kTopology, \
    "Workers (ranks) on this node; one per GPU on GPU machines.") \
  X(int32, nnodes, 1, kTopology, \
    "Nodes in the job.") \
  X(int32, node_rank, 0, kTopology, \
    "This node's index, 0 <= node_rank < nnodes.") \
  X(string, master_addr, "127.0.0.1", kTopology, \
    "Host of node 0, where rank 0 hosts the rendezvous store.") \
  X(int32, master_port, 0, kTopology, \
    "Rendezvous port on node 0. Default: a free port on one node, 29500 across nodes.") \
  X(int32, data_parallel_size, 1, kReplicas, \
    "launcher serve: replicas of the server, each a complete engine of --nproc_per_node ranks on its share of " \
    "a node's CPUs (or GPUs), behind one endpoint on --port (node 0's); across --nnodes, as many on each node.") \
  X(string, routing, "prefix", kReplicas, \
    "Replicas: which one takes a request. prefix: the one whose prefix cache holds the longest run of the " \
    "prompt's leading token blocks (from the engines' cache events), unless it is much busier than the least " \
    "loaded; least_loaded; round_robin.") \
  X(int32, max_restarts, 3, kReplicas, \
    "Replicas: times each is started again after one of its ranks fails (after 1 s; doubling to 30 s while it " \
    "fails before serving), while the others serve. A batch job, a chat or a single server still ends at the " \
    "first failure.") \
  X(bool, store_listen_all, false, kTopology, \
    "Node 0's rendezvous store listens on every interface, not only on the one that reaches " \
    "--master_addr (for nodes that reach node 0 through another address, e.g. across NAT).") \
  X(string, token_file, "", kTopology, \
    "File holding the job's shared secret (else $RENDEZVOUS_TOKEN, else a fresh one on one node).") \
  X(bool, node_local_shards, false, kTopology, \
    "Multi-node: every node converts its own shards (nodes that share no storage). By default node 0 " \
    "converts and the other nodes wait for its shards on the shared storage.") \
  X(string, worker_env, "", kRunning, \
    "NAME=value in every worker's environment; repeat it for more. Workers inherit the launcher's " \
    "environment (NCCL_*, CUDA_*, UCX_*, OMP_*, LD_LIBRARY_PATH, PATH, HOME, SLURM_*, ...) but the variables " \
    "the launcher sets itself (RANK, WORLD_SIZE, MASTER_ADDR, RENDEZVOUS_TOKEN, CUDA_VISIBLE_DEVICES, ...).") \
  X(string, worker, "", kRunning, \
    "The worker binary. Default: //worker from this binary's runfiles.") \
  X(int32, grace_period, 5, kRunning, \
    "Seconds between SIGTERM and SIGKILL when stopping workers.") \
  X(string, demo_dir, "", kRunning, \
    "Where the demo job keeps its checkpoint. Default: ~/.cache/llama2-cpp/demo " \
    "($XDG_CACHE_HOME/llama2-cpp/demo when set).")

namespace llama {

// Everything the launcher reads from its command line, read once.
struct LauncherFlags {
#define LLAMA_LAUNCHER_FLAG_FIELD(type, name, default_value, group, help) \
  LLAMA_FLAG_CPP_TYPE_##type name = default_value;
  LLAMA_LAUNCHER_FLAGS(LLAMA_LAUNCHER_FLAG_FIELD)
#undef LLAMA_LAUNCHER_FLAG_FIELD
  // Given on the command line (the demo runs 2 workers unless told).
  bool nproc_per_node_given = false;
  // Given on the command line (under srun it then overrides the first node's name).
  bool master_addr_given = false;
  // Every --worker_env, in order (gflags keeps only the last).
  std::vector<std::string> worker_environment;
  // Every --sbatch_arg (launcher sbatch), in order.
  std::vector<std::string> sbatch_options;
  // glog's --log_dir, reused for the per-rank logs; empty: a folder per run.
  std::string log_dir;
  // `launcher download`'s --models and --target_dir: a job without
  // --ckpt_dir downloads them first.
  std::string download_models, download_target_dir;
  JobFlags job;
};

// Binaries only (it reads gflags). `given` is the command line as it came,
// before gflags took the flags out, for the repeatable flags.
LauncherFlags LauncherFlagsFromCommandLine(const std::vector<std::string>& given);

// The value of every `--name=value` (or `-name=value`) in `given`, in order.
std::vector<std::string> RepeatedFlagValues(const std::vector<std::string>& given, const std::string& name);

// The names of `group`'s flags, in the table's order, for --help.
std::vector<std::string> LauncherFlagNames(LauncherFlagGroup group);

}  // namespace llama

#endif  // LLAMA_LAUNCHER_LAUNCHER_FLAGS_H_
