// The Llama 2 transformer of one tensor-parallel rank on an NVIDIA GPU: the
// same computation as Transformer (transformer.h), with the weights uploaded
// once from the mapped shard, the KV cache and every work buffer on the
// device, linears through cuBLAS and the collectives through the given
// communicator on device pointers (NcclCommunicator; none needed for one
// rank). Forward returns the wanted logit rows in host memory.
//
// NaN/Inf: each layer's output is checked on the device into a per-layer
// flag, read back with the logits, so a bad value is reported with the
// first layer it appeared in without a host synchronisation per layer.

#ifndef LLAMA_WORKER_CUDA_TRANSFORMER_H_
#define LLAMA_WORKER_CUDA_TRANSFORMER_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/communicator.h"
#include "worker/language_model.h"
#include "worker/model_weights.h"
#include "worker/transformer.h"

namespace llama {

// Not thread-safe.
class CudaTransformer final : public LanguageModel {
 public:
  // Uses the current CUDA device (the worker selects it from LOCAL_RANK).
  static absl::StatusOr<std::unique_ptr<CudaTransformer>> Create(const ModelWeights& weights,
                                                                 Communicator* communicator,
                                                                 const TransformerOptions& options);
  ~CudaTransformer() override;

  int64_t vocab_size() const override;
  int max_batch_size() const override;
  int64_t max_seq_len() const override;
  int64_t max_step_tokens() const override;
  absl::StatusOr<absl::Span<const float>> Forward(absl::Span<const SequenceChunk> chunks) override;

 private:
  struct State;
  explicit CudaTransformer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace llama

#endif  // LLAMA_WORKER_CUDA_TRANSFORMER_H_
