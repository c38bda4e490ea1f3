#include "worker/rank_model.h"

#include <algorithm>

#include <glog/logging.h>

#include "absl/strings/str_format.h"
#include "base/allowed_cpus.h"
#include "base/status_macros.h"
#include "third_party/cuda/cuda_build_info.h"
#include "worker/collectives/tcp_communicator.h"
#include "worker/model/transformer.h"
#if LLAMA_WITH_CUDA
#include <cuda_runtime.h>

#include "ops/cuda/cuda_status.h"
#include "worker/collectives/nccl_communicator.h"
#include "worker/model/cuda_transformer.h"
#endif

namespace llama {

absl::StatusOr<RankPeers> JoinPeers(const RendezvousOptions& options, int local_rank) {
  RankPeers peers;
  peers.rank = options.rank;
  peers.local_rank = local_rank;
  peers.world_size = options.world_size;
  if (options.world_size == 1) {
    peers.host = std::make_unique<LocalCommunicator>();
    return peers;
  }
  ASSIGN_OR_RETURN(peers.rendezvous, Rendezvous::Join(options));
  return peers;
}

absl::Status OpenHostCollective(RankPeers& peers, std::chrono::seconds collective_timeout) {
  if (peers.host != nullptr) return absl::OkStatus();
  ASSIGN_OR_RETURN(peers.host, TcpCommunicator::Create(peers.rendezvous.get(), collective_timeout));
  return absl::OkStatus();
}

absl::StatusOr<TransformerOptions> TransformerOptionsFromFlags(const JobFlags& flags, int local_world_size) {
  TransformerOptions options;
  ASSIGN_OR_RETURN(options.kv_cache_dtype, ParseFloat16Or32Flag("kv_cache_dtype", flags.kv_cache_dtype));
  options.cuda_graphs = flags.cuda_graphs;
  options.int8_prefill = flags.int8_prefill;
  options.bf16_activations = flags.bf16_activations;
  options.max_batch_size = flags.max_batch_size;
  options.max_seq_len = flags.max_seq_len;
  options.max_step_tokens = std::max(flags.max_num_batched_tokens, flags.max_batch_size);
  options.kv_block_size = flags.kv_block_size;
  options.kv_cache_bytes = flags.kv_cache_gb * 1e9;
  // The CPUs this process may use (Slurm's allocation), shared by the node's ranks.
  options.threads = flags.threads > 0 ? flags.threads : std::max(1, AllowedCpuCount() / std::max(1, local_world_size));
  return options;
}

namespace {

// The share of free memory a KV cache sized by default may take.
constexpr double kDefaultKvShare = 0.9;

// The smallest of every rank's `value`: each rank's in turn, broadcast.
absl::StatusOr<int64_t> MinOverRanks(Communicator& communicator, int64_t value) {
  int64_t smallest = value;
  for (int root = 0; root < communicator.world_size(); ++root) {
    int64_t theirs = value;
    RETURN_IF_ERROR(communicator.Broadcast(&theirs, sizeof(theirs), root));
    smallest = std::min(smallest, theirs);
  }
  return smallest;
}

// The KV blocks `share` of the free memory holds for this rank, the
// smallest over the ranks. On the CPU the node's ranks share its memory:
// each counts every local rank's weights and buffers, and takes its part.
absl::StatusOr<int64_t> FreeShareBlocks(const JobFlags& flags, const ModelWeights& weights, Device device,
                                        RankPeers& peers, int local_world_size, const RankPlan& plan, double share) {
  ASSIGN_OR_RETURN(const double free, FreeMemoryBytes(device, peers.local_rank));
  const Sampling sampling = device == Device::kCpu ? Sampling::kOnHost : Sampling::kOnDevice;
  const int sharers = device == Device::kCpu ? std::max(1, local_world_size) : 1;
  const double taken =
      sharers * (StoredWeightBytes(weights) + WorkBytes(plan, sampling));
  RETURN_IF_ERROR(OpenHostCollective(peers, std::chrono::seconds(flags.collective_timeout)));
  return MinOverRanks(*peers.host, KvBlocksInBytes(plan, share * std::max(0.0, free - taken) / sharers));
}

}  // namespace

absl::StatusOr<RankPlan> PlanRankModel(const JobFlags& flags, const ModelWeights& weights, Device device,
                                       RankPeers& peers, int local_world_size) {
  ASSIGN_OR_RETURN(TransformerOptions options, TransformerOptionsFromFlags(flags, local_world_size));
  const bool own_context = options.max_seq_len == 0;
  if (!own_context && flags.kv_cache_free_share <= 0) {
    return PlanRank(weights, peers.rank, peers.world_size, options);  // --kv_cache_gb, or batch x context.
  }
  // The cache first; with the model's own context, the context is then at
  // most what the cache holds (a cache the user sized included).
  if (own_context) options.max_seq_len = weights.config.context_length();
  const double given_bytes = options.kv_cache_bytes;
  options.kv_cache_bytes = 0;
  ASSIGN_OR_RETURN(RankPlan plan, PlanRank(weights, peers.rank, peers.world_size, options));
  int64_t blocks = plan.limits.kv_blocks;
  if (flags.kv_cache_free_share > 0) {
    ASSIGN_OR_RETURN(blocks, FreeShareBlocks(flags, weights, device, peers, local_world_size, plan,
                                             flags.kv_cache_free_share));
  } else if (given_bytes > 0) {
    blocks = std::max<int64_t>(1, KvBlocksInBytes(plan, given_bytes));
  } else {
    // vLLM's gpu_memory_utilization default, 0.9.
    ASSIGN_OR_RETURN(const int64_t fits,
                     FreeShareBlocks(flags, weights, device, peers, local_world_size, plan, kDefaultKvShare));
    blocks = std::min(blocks, fits);
  }
  if (own_context && blocks < plan.limits.blocks_per_sequence()) {
    options.max_seq_len = std::min<int64_t>(options.max_seq_len, blocks * options.kv_block_size);
    if (options.max_seq_len < 2) {
      return absl::ResourceExhaustedError(
          "no room for a KV cache once the weights are loaded: free memory, or give --kv_cache_gb");
    }
    LOG(INFO) << absl::StrFormat(
        "context %d positions: the model's own %d does not fit the KV cache (%d blocks; --max_seq_len, "
        "--kv_cache_gb and --kv_cache_free_share choose)",
        options.max_seq_len, weights.config.context_length(), blocks);
    ASSIGN_OR_RETURN(plan, PlanRank(weights, peers.rank, peers.world_size, options));
  }
  RETURN_IF_ERROR(SetKvBlocks(plan, blocks));
  return plan;
}

absl::StatusOr<Device> ChooseRankDevice(const std::string& flag) {
  int gpus = 0;
#if LLAMA_WITH_CUDA
  if (flag.empty()) gpus = cuda::VisibleDeviceCount().value_or(0);
#endif
  return ChooseDevice(flag, gpus);
}

absl::StatusOr<double> FreeMemoryBytes(Device device, int local_rank) {
  if (device == Device::kCpu) return AvailableHostMemoryBytes();
#if LLAMA_WITH_CUDA
  ASSIGN_OR_RETURN(const int gpus, cuda::VisibleDeviceCount());
  if (gpus == 0) return absl::FailedPreconditionError("--device=cuda: no GPU visible to this process");
  RETURN_IF_ERROR(cuda::CudaCall(cudaSetDevice(RankGpu(gpus, local_rank)), "cudaSetDevice"));
  size_t free = 0, total = 0;
  RETURN_IF_ERROR(cuda::CudaCall(cudaMemGetInfo(&free, &total), "cudaMemGetInfo"));
  return static_cast<double>(free);
#else
  return absl::FailedPreconditionError("--device=cuda: this binary was built without CUDA");
#endif
}

absl::StatusOr<RankModel> CreateRankModel(Device device, RankPeers& peers, ModelWeights weights,
                                          const RankPlan& plan, std::chrono::seconds collective_timeout) {
  RETURN_IF_ERROR(OpenHostCollective(peers, collective_timeout));
  RankModel made;
  if (device == Device::kCpu) {
    ASSIGN_OR_RETURN(made.model, Transformer::Create(std::move(weights), peers.host.get(), plan));
    return made;
  }
#if LLAMA_WITH_CUDA
  ASSIGN_OR_RETURN(const int gpus, cuda::VisibleDeviceCount());
  if (gpus == 0) return absl::FailedPreconditionError("--device=cuda: no GPU visible to this process");
  const int gpu = RankGpu(gpus, peers.local_rank);
  RETURN_IF_ERROR(cuda::CudaCall(cudaSetDevice(gpu), "cudaSetDevice"));
  NcclCommunicator* nccl = nullptr;
  if (peers.rendezvous != nullptr) {
    ASSIGN_OR_RETURN(std::unique_ptr<NcclCommunicator> created,
                     NcclCommunicator::Create(peers.rendezvous.get(), gpu, collective_timeout));
    nccl = created.get();
    made.device_collective = std::move(created);
  }
  ASSIGN_OR_RETURN(made.model, CudaTransformer::Create(weights, nccl, plan));
  return made;
#else
  return absl::FailedPreconditionError("--device=cuda: this binary was built without CUDA");
#endif
}

}  // namespace llama
