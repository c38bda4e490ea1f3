// Building the model of one rank, as the worker and the bench both do:
// join the peers (a TCP rendezvous and the TCP collective that carries the
// host-side agreement), choose the device, and create the model on it with
// its device collectives (NCCL on GPUs).

#ifndef LLAMA_WORKER_RANK_MODEL_H_
#define LLAMA_WORKER_RANK_MODEL_H_

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "ops/device.h"
#include "worker/collectives/communicator.h"
#include "worker/collectives/rendezvous.h"
#include "worker/job_flags.h"
#include "worker/model/language_model.h"
#include "worker/model/model_weights.h"
#include "worker/model/rank_plan.h"

namespace llama {

// This rank's place and its peers. A world of one has no rendezvous and a
// LocalCommunicator.
struct RankPeers {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  std::unique_ptr<Rendezvous> rendezvous;
  std::unique_ptr<Communicator> host;  // The TCP collective (or local).
};

// Joins the store that rank 0 hosts (when options.world_size > 1). The
// host collective opens later (OpenHostCollective), once the caller has
// agreed with its peers on the job and the model (Rendezvous::AgreeOnModel).
absl::StatusOr<RankPeers> JoinPeers(const RendezvousOptions& options, int local_rank);

// The TCP collective: it carries the host-side agreement (sampled tokens)
// on every backend, and the model's collectives on the CPU. Opening it
// again does nothing.
absl::Status OpenHostCollective(RankPeers& peers, std::chrono::seconds collective_timeout);

// ChooseDevice (ops/device.h) for `flag` with the GPUs this process sees.
absl::StatusOr<Device> ChooseRankDevice(const std::string& flag);

// Memory free for this rank's model on `device`, in bytes (0 if unknown):
// MemAvailable on the CPU, the GPU's free memory (LOCAL_RANK's GPU, or the
// only one visible) on CUDA.
absl::StatusOr<double> FreeMemoryBytes(Device device, int local_rank);

// The model options a job's flags ask for, on a rank whose host runs
// `local_world_size` ranks: the KV cache's dtype, block size and
// --kv_cache_gb, graphs, int8 prefill, the batch and context limits, a
// step's token budget (room for every running sequence's decode) and
// threads (--threads, or the host's cores shared among its ranks).
absl::StatusOr<TransformerOptions> TransformerOptionsFromFlags(const JobFlags& flags, int local_world_size);

// This rank's plan for `weights` on `device`: PlanRank of the flags'
// options, then, with --kv_cache_free_share, the KV cache that share of the
// device's free memory holds once the weights (a copy: the CPU packs them,
// a GPU uploads them) and work buffers are counted; the smallest over the
// ranks (through the host collective, which it opens), since rank 0 hands
// out block ids that every rank's pool must have.
absl::StatusOr<RankPlan> PlanRankModel(const JobFlags& flags, const ModelWeights& weights, Device device,
                                       RankPeers& peers, int local_world_size);

struct RankModel {
  // Declared first, destroyed last: the model uses it.
  std::unique_ptr<Communicator> device_collective;
  std::unique_ptr<LanguageModel> model;
};

// The model of `plan` on `device`. On CUDA the GPU is LOCAL_RANK's, or the
// only one visible (the launcher gives each rank its own
// CUDA_VISIBLE_DEVICES), and collectives go through NCCL, set up through
// peers.rendezvous.
absl::StatusOr<RankModel> CreateRankModel(Device device, RankPeers& peers, ModelWeights weights,
                                          const RankPlan& plan, std::chrono::seconds collective_timeout);

}  // namespace llama

#endif  // LLAMA_WORKER_RANK_MODEL_H_
