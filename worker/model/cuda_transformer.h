// The Llama 2 transformer of one tensor-parallel rank on an NVIDIA GPU: the
// step of llama_forward.h, as Transformer (transformer.h) runs it, over
// CudaLayerOps: the weights uploaded once from the mapped shard, the KV
// cache (f32, bf16 or f16) and every work buffer on the device, linears
// through cuBLAS and the collectives through NCCL on the model's stream.
//
// A step enqueues everything on one stream and synchronises once, at the
// end: ForwardAndChoose picks the tokens on the device (cuda::SampleRows)
// and only token ids and their log-probabilities come back; Forward (for
// prompt log-probabilities) copies the wanted logit rows back. Per-step
// inputs go through page-locked staging buffers, and a step allocates
// nothing. Decode steps replay a CUDA graph per row count
// (worker/model/step_graphs.h).
//
// NaN/Inf: each layer's output is checked on the device into a per-layer
// flag, read back with the results, so a bad value is reported with the
// first layer it appeared in without a host synchronisation per layer.

#ifndef LLAMA_WORKER_MODEL_CUDA_TRANSFORMER_H_
#define LLAMA_WORKER_MODEL_CUDA_TRANSFORMER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "worker/collectives/nccl_communicator.h"
#include "worker/model/language_model.h"
#include "worker/model/model_weights.h"
#include "worker/model/rank_plan.h"

namespace llama {

// Not thread-safe.
class CudaTransformer final : public LanguageModel {
 public:
  // Uses the current CUDA device (the worker selects it from LOCAL_RANK).
  // `nccl` (null for a world of one) must outlive the model; the model
  // sets its stream. `plan` is PlanRank's for these weights and nccl's rank.
  static absl::StatusOr<std::unique_ptr<CudaTransformer>> Create(const ModelWeights& weights, NcclCommunicator* nccl,
                                                                 const RankPlan& plan);
  ~CudaTransformer() override;

  const ModelLimits& limits() const override;
  absl::StatusOr<absl::Span<const float>> Forward(absl::Span<const SequenceChunk> chunks) override;
  absl::Status ForwardAndChoose(absl::Span<const SequenceChunk> chunks, absl::Span<const TokenChoice> choices,
                                absl::Span<ChosenToken> chosen) override;

  // Decode-step graphs captured so far; 0 with graphs off or refused.
  int graphs_captured() const;

 private:
  struct State;
  explicit CudaTransformer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace llama

#endif  // LLAMA_WORKER_MODEL_CUDA_TRANSFORMER_H_
