// The Llama 2 transformer of one tensor-parallel rank, on the CPU: the step
// of llama_forward.h over CpuLayerOps. Activations are f32 whatever the
// weights' dtype; the linear weights are packed once at Create for the
// batch-invariant kernels (ops/cpu/linear.h), the rest stay views of the
// mapped shard. The paged KV
// cache ([kv_blocks, kv_block_size, local KV heads, head_dim] per layer,
// f32, bf16 or f16) and every work buffer are allocated once, at Create.

#ifndef LLAMA_WORKER_MODEL_TRANSFORMER_H_
#define LLAMA_WORKER_MODEL_TRANSFORMER_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/rank_geometry.h"
#include "ops/cpu/thread_pool.h"
#include "ops/tensor.h"
#include "worker/collectives/communicator.h"
#include "worker/model/cpu_layer_ops.h"
#include "worker/model/language_model.h"
#include "worker/model/model_weights.h"
#include "worker/model/rank_plan.h"
#include "worker/model/step_plan.h"

namespace llama {

// Not thread-safe: one caller at a time (it uses its own thread pool inside).
class Transformer final : public LanguageModel {
 public:
  // `plan` is PlanRank's for these weights; `communicator` must outlive
  // the model and be the plan's rank of its world size.
  static absl::StatusOr<std::unique_ptr<Transformer>> Create(ModelWeights weights, Communicator* communicator,
                                                             const RankPlan& plan);

  const ModelLimits& limits() const override { return plan_.limits; }
  absl::StatusOr<absl::Span<const float>> Forward(absl::Span<const SequenceChunk> chunks) override;

  const ModelConfig& config() const { return weights_.config; }

 private:
  // Every buffer the model owns, allocated once by Create.
  struct Buffers {
    std::vector<Tensor> k_cache, v_cache;  // Per layer.
    std::vector<Tensor> work;  // WorkBuffers' list, [max_step_tokens, width] each.
    Activations activations;   // Views of `work`.
  };
  static absl::StatusOr<Buffers> AllocateBuffers(const RankPlan& plan);

  Transformer(ModelWeights weights, const RankPlan& plan, Buffers buffers, Communicator* communicator);

  ModelWeights weights_;
  RankPlan plan_;
  ThreadPool pool_;
  Buffers buffers_;
  std::vector<KvCacheView> caches_;
  CpuLayerOps ops_;
  StepPlan step_;
};

}  // namespace llama

#endif  // LLAMA_WORKER_MODEL_TRANSFORMER_H_
