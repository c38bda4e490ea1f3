// How a model is set up on a rank (cache size, step size, KV storage), and
// the one check of those options and of the weights against the rank, used
// by every backend so that each mistake reads the same on every device.

#ifndef LLAMA_WORKER_MODEL_MODEL_OPTIONS_H_
#define LLAMA_WORKER_MODEL_MODEL_OPTIONS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "checkpoint/rank_geometry.h"
#include "ops/dtype.h"
#include "worker/model/model_weights.h"
#include "worker/model/step_plan.h"

namespace llama {

struct TransformerOptions {
  // Sequences one step may hold.
  int max_batch_size = 4;
  int64_t max_seq_len = 512;
  // The paged KV cache (ops/kv_cache_view.h): kv_blocks blocks of
  // kv_block_size positions; 0 blocks: enough for max_batch_size sequences
  // of max_seq_len, the memory a cache of fixed slots would take.
  int64_t kv_block_size = 16;
  int64_t kv_blocks = 0;
  // Tokens per Forward call; longer prompts are prefilled in pieces.
  int64_t max_step_tokens = 512;
  int threads = 0;  // CPU: 0 is one per hardware thread.
  // Storage of cached keys and values. bf16/f16 halve the cache (the
  // reference keeps it in the model's 16-bit dtype); math stays f32.
  DType kv_cache_dtype = DType::kF32;
  // CPU, int8 weights: prefill with int8 activations too (cpu::LinearOptions).
  bool int8_prefill = false;
  // CPU, bf16 weights: x rounded to bf16 for every linear layer
  // (cpu::LinearOptions). The GPU already multiplies batches that way.
  bool bf16_activations = false;
  // CUDA backend: replay decode steps from captured CUDA graphs
  // (worker/model/step_graphs.h). Off only to compare or to debug.
  bool cuda_graphs = true;
};

// Checks the options, the weights' config and layer count, and that the
// shard was made for this rank of this world size; returns the rank's
// geometry.
absl::StatusOr<RankGeometry> CheckModel(const ModelWeights& weights, int rank, int world_size,
                                        const TransformerOptions& options);

// The message for a model whose weights, cache and buffers exceed the
// memory `where` ("this GPU", "this machine") has free, in the flags'
// terms; OK when they fit or `free_bytes` is unknown (0).
absl::Status CheckMemory(const RankGeometry& geometry, const TransformerOptions& options, double weight_bytes,
                         double free_bytes, const char* where);

StepLimits StepLimitsOf(const TransformerOptions& options, int64_t vocab_size);

// options.kv_blocks, or its default.
int64_t KvBlocksOf(const TransformerOptions& options);

// The blocks of options.kv_block_size positions that `bytes` of this
// rank's memory hold (--kv_cache_gb), in options.kv_cache_dtype.
int64_t KvBlocksInBytes(const RankGeometry& geometry, const TransformerOptions& options, double bytes);

// MemAvailable from /proc/meminfo, in bytes; 0 if unknown.
double AvailableHostMemoryBytes();

}  // namespace llama

#endif  // LLAMA_WORKER_MODEL_MODEL_OPTIONS_H_
