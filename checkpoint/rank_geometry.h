// The sizes one tensor-parallel rank works with, derived once from the
// model config and the rank (fairscale's split, checkpoint/llama_layout.h):
// the widths of its slices, and which KV head each of its query heads
// reads. What those take in memory is the model's business
// (worker/model/rank_plan.h).

#ifndef LLAMA_CHECKPOINT_RANK_GEOMETRY_H_
#define LLAMA_CHECKPOINT_RANK_GEOMETRY_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/model_config.h"

namespace llama {

struct RankGeometry {
  ModelConfig config;
  int rank = 0;
  int world_size = 1;
  int64_t head_dim = 0;
  int64_t local_heads = 0;     // Query heads of this rank.
  int64_t local_kv_heads = 0;  // KV heads it holds (one replicated head when ranks outnumber them).
  int64_t kv_head_begin = 0;   // Global index of its first KV head.
  int64_t local_hidden = 0;    // FFN width of its w1/w3 rows and w2 columns.
  int64_t local_dim = 0;       // Embedding columns (ParallelEmbedding).
  int64_t local_vocab = 0;     // Output rows (ColumnParallelLinear).
  // Local query head -> local KV head.
  std::vector<int32_t> kv_head_of;

  int64_t q_width() const { return local_heads * head_dim; }
  int64_t kv_width() const { return local_kv_heads * head_dim; }
};

// Checks the config (ValidateModelConfig) and the split (CheckWorldSize).
absl::StatusOr<RankGeometry> ComputeRankGeometry(const ModelConfig& config, int rank, int world_size);

}  // namespace llama

#endif  // LLAMA_CHECKPOINT_RANK_GEOMETRY_H_
