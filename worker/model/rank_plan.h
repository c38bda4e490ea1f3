// What a rank's model is asked to be (TransformerOptions, from the flags)
// and what it is once resolved (RankPlan): the rank's geometry, its limits
// with every default decided, and the memory each piece takes. A rank plans
// once, before it allocates anything; both backends and the bench take the
// plan and never re-derive it.

#ifndef LLAMA_WORKER_MODEL_RANK_PLAN_H_
#define LLAMA_WORKER_MODEL_RANK_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/rank_geometry.h"
#include "ops/dtype.h"
#include "ops/rope_table.h"
#include "worker/model/language_model.h"
#include "worker/model/layer_ops.h"
#include "worker/model/model_weights.h"

namespace llama {

struct TransformerOptions {
  // Sequences one step may hold.
  int max_batch_size = 4;
  int64_t max_seq_len = 512;
  // The paged KV cache (ops/kv_cache_view.h): blocks of kv_block_size
  // positions, as many as kv_blocks says, else as kv_cache_bytes of this
  // rank's memory hold (--kv_cache_gb), else enough for max_batch_size
  // sequences of max_seq_len (the memory a cache of fixed slots would take).
  int64_t kv_block_size = 16;
  int64_t kv_blocks = 0;
  double kv_cache_bytes = 0;
  // Tokens per Forward call; longer prompts are prefilled in pieces.
  int64_t max_step_tokens = 512;
  int threads = 0;  // CPU: 0 is one per hardware thread.
  // Storage of cached keys and values. bf16/f16 halve the cache (the
  // reference keeps it in the model's 16-bit dtype); math stays f32.
  DType kv_cache_dtype = DType::kF32;
  // CPU, int8 and K-quant weights: prefill with int8 activations too, as
  // decode (cpu::LinearOptions), so rows are independent of their batch.
  bool int8_prefill = true;
  // CPU, bf16 weights: x rounded to bf16 for every linear layer
  // (cpu::LinearOptions). The GPU already multiplies batches that way.
  bool bf16_activations = false;
  // CUDA backend: replay decode steps from captured CUDA graphs
  // (worker/model/step_graphs.h). Off only to compare or to debug.
  bool cuda_graphs = true;
};

// A rank's model, resolved: nothing in it is left to decide later.
struct RankPlan {
  RankGeometry geometry;
  ModelLimits limits;  // kv_blocks decided; holds at least one sequence.
  int threads = 1;     // CPU worker threads.
  DType kv_cache_dtype = DType::kF32;
  bool int8_prefill = true;
  bool bf16_activations = false;
  bool cuda_graphs = true;

  const ModelConfig& config() const { return geometry.config; }
};

// Checks the options, the weights' config and layer count, and that the
// shard was made for this rank of this world size, and resolves them.
absl::StatusOr<RankPlan> PlanRank(const ModelWeights& weights, int rank, int world_size,
                                  const TransformerOptions& options);

// Gives the plan's KV cache `blocks` blocks, which must hold one sequence
// of max_seq_len (the message says which flags give it more).
absl::Status SetKvBlocks(RankPlan& plan, int64_t blocks);

// The blocks of the plan's block size and cache dtype that `bytes` hold.
int64_t KvBlocksInBytes(const RankPlan& plan, double bytes);

// This rank's weights stored as `dtype` (norms included); the embedding
// alone (read a row per token, not streamed per step).
double WeightBytes(const RankGeometry& geometry, DType dtype);
double EmbeddingBytes(const RankGeometry& geometry, DType dtype);
// Keys and values of every layer for `positions` cached positions.
double KvCacheBytes(const RankGeometry& geometry, int64_t positions, DType cache_dtype);
// The whole KV cache of the plan.
double KvCacheBytes(const RankPlan& plan);

// Where the sampler's probability rows live: a device that samples keeps a
// work buffer of them; the CPU samples each row in a buffer of its own.
enum class Sampling { kOnHost, kOnDevice };

// The step's work buffers, one row each: the Activations member and its
// width (each buffer is [max_step_tokens, width] f32). Both backends
// allocate from this list, and WorkBytes counts it.
struct WorkBuffer {
  float* Activations::*member;
  int64_t width;
};
std::vector<WorkBuffer> WorkBuffers(const RankGeometry& geometry, Sampling sampling);
double WorkBytes(const RankPlan& plan, Sampling sampling);

// The message for a model whose weights, cache and buffers exceed the
// memory `where` ("this GPU", "this machine") has free, in the flags'
// terms; OK when they fit or `free_bytes` is unknown (0).
absl::Status CheckMemory(const RankPlan& plan, Sampling sampling, double weight_bytes, double free_bytes,
                         const char* where);

// The rotary table of the plan's positions (twice max_seq_len, as the
// reference's freqs_cis), on the host; a device uploads it.
RopeTable RopeTableOf(const RankPlan& plan);

// MemAvailable from /proc/meminfo, in bytes; 0 if unknown.
double AvailableHostMemoryBytes();

}  // namespace llama

#endif  // LLAMA_WORKER_MODEL_RANK_PLAN_H_
