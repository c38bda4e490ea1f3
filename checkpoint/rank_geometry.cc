#include "checkpoint/rank_geometry.h"

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "checkpoint/llama_layout.h"

namespace llama {

absl::StatusOr<RankGeometry> ComputeRankGeometry(const ModelConfig& config, int rank, int world_size) {
  RETURN_IF_ERROR(ValidateModelConfig(config, "model config"));
  if (config.vocab_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("model config: vocab_size %d; expected the tokenizer's size", config.vocab_size));
  }
  RETURN_IF_ERROR(CheckWorldSize(config, world_size));
  if (rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(absl::StrFormat("rank %d outside [0, %d)", rank, world_size));
  }
  RankGeometry g;
  g.config = config;
  g.rank = rank;
  g.world_size = world_size;
  g.head_dim = config.head_dim();
  g.local_heads = config.n_heads / world_size;
  const TensorSpec kv{"", {config.n_kv_heads * g.head_dim, config.dim}, SplitKind::kKvColumn};
  const DimRange kv_rows = RankSlice(kv, config, rank, world_size);
  g.local_kv_heads = (kv_rows.end - kv_rows.begin) / g.head_dim;
  g.kv_head_begin = kv_rows.begin / g.head_dim;
  g.local_hidden = config.ffn_hidden_dim() / world_size;
  g.local_dim = config.dim / world_size;
  g.local_vocab = config.vocab_size / world_size;
  // Global query head h reads global KV head h / (n_heads / n_kv_heads).
  const int64_t group = config.n_heads / config.n_kv_heads;
  for (int64_t j = 0; j < g.local_heads; ++j) {
    g.kv_head_of.push_back(static_cast<int32_t>((rank * g.local_heads + j) / group - g.kv_head_begin));
  }
  return g;
}

}  // namespace llama
