// The Llama 2 transformer of one tensor-parallel rank, on the CPU:
//
//   h = tok_embeddings(tokens)                      (parallel embedding + all-gather)
//   for each layer:
//     h = h + wo(attention(rope(wq x), rope(wk x), wv x))   x = attention_norm(h)
//     h = h + w2(silu(w1 x) * w3 x)                         x = ffn_norm(h)
//   logits = output(norm(h))                         (column-parallel + all-gather)
//
// with wo and w2 all-reduced across ranks (row-parallel), as model.py with
// fairscale's layers. Activations are f32 whatever the weights' dtype. The
// KV cache (f32, [max_batch_size, max_seq_len, local KV heads, head_dim]
// per layer) and every work buffer are allocated once, at Create.

#ifndef LLAMA_WORKER_TRANSFORMER_H_
#define LLAMA_WORKER_TRANSFORMER_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "ops/cpu/rope.h"
#include "ops/cpu/thread_pool.h"
#include "ops/tensor.h"
#include "worker/dist/communicator.h"
#include "worker/model/language_model.h"
#include "worker/model/model_weights.h"

namespace llama {

struct TransformerOptions {
  int max_batch_size = 4;
  int64_t max_seq_len = 512;
  // Tokens per Forward call; longer prompts are prefilled in pieces.
  int64_t max_step_tokens = 512;
  int threads = 0;  // 0: one per hardware thread.
  // Storage of cached keys and values. bf16/f16 halve the cache (the
  // reference keeps it in the model's 16-bit dtype); math stays f32.
  DType kv_cache_dtype = DType::kF32;
  // CUDA backend: replay decode steps from captured CUDA graphs
  // (worker/model/step_graphs.h). Off only to compare or to debug.
  bool cuda_graphs = true;
};

// Not thread-safe: one caller at a time (it uses its own thread pool inside).
class Transformer final : public LanguageModel {
 public:
  // `communicator` must outlive the model and match the weights' rank and
  // world size.
  static absl::StatusOr<std::unique_ptr<Transformer>> Create(ModelWeights weights, Communicator* communicator,
                                                             const TransformerOptions& options);

  int64_t vocab_size() const override { return config().vocab_size; }
  int max_batch_size() const override { return options_.max_batch_size; }
  int64_t max_seq_len() const override { return options_.max_seq_len; }
  int64_t max_step_tokens() const override { return options_.max_step_tokens; }
  absl::StatusOr<absl::Span<const float>> Forward(absl::Span<const SequenceChunk> chunks) override;

  const ModelConfig& config() const { return weights_.config; }

 private:
  Transformer(ModelWeights weights, Communicator* communicator, const TransformerOptions& options);
  absl::Status CheckChunks(absl::Span<const SequenceChunk> chunks, int64_t* tokens, int64_t* rows) const;
  absl::Status Layer(int index, absl::Span<const SequenceChunk> chunks, int64_t n);
  // Gathers per-rank column slices [n, width] into full rows [n, ws * width].
  absl::Status GatherColumns(const float* local, int64_t n, int64_t width, float* full);

  ModelWeights weights_;
  Communicator* communicator_;
  TransformerOptions options_;
  ThreadPool pool_;
  cpu::RopeTable rope_;
  int64_t local_heads_, local_kv_heads_, head_dim_, local_hidden_;
  std::vector<int> kv_head_of_;  // Local query head -> local KV head.
  std::vector<Tensor> k_cache_, v_cache_;  // Per layer.
  // Work buffers, [max_step_tokens, width].
  Tensor x_, xb_, q_, k_, v_, attention_, projection_, gate_, up_, gathered_, logits_local_, logits_;
  std::vector<int> tokens_;
};

}  // namespace llama

#endif  // LLAMA_WORKER_TRANSFORMER_H_
