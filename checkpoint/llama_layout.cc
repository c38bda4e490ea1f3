#include "checkpoint/llama_layout.h"

#include "absl/strings/str_cat.h"

namespace llama {

int TensorSpec::split_dim() const {
  switch (split) {
    case SplitKind::kReplicated:
      return -1;
    case SplitKind::kColumn:
    case SplitKind::kKvColumn:
      return 0;
    case SplitKind::kRow:
    case SplitKind::kEmbedding:
      return 1;
  }
  return -1;
}

std::vector<TensorSpec> LlamaTensors(const ModelConfig& c) {
  const int64_t hd = c.head_dim(), hidden = c.ffn_hidden_dim();
  std::vector<TensorSpec> specs = {{"tok_embeddings.weight", {c.vocab_size, c.dim}, SplitKind::kEmbedding}};
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string p = absl::StrCat("layers.", i, ".");
    specs.push_back({p + "attention.wq.weight", {c.n_heads * hd, c.dim}, SplitKind::kColumn});
    specs.push_back({p + "attention.wk.weight", {c.n_kv_heads * hd, c.dim}, SplitKind::kKvColumn});
    specs.push_back({p + "attention.wv.weight", {c.n_kv_heads * hd, c.dim}, SplitKind::kKvColumn});
    specs.push_back({p + "attention.wo.weight", {c.dim, c.n_heads * hd}, SplitKind::kRow});
    specs.push_back({p + "feed_forward.w1.weight", {hidden, c.dim}, SplitKind::kColumn});
    specs.push_back({p + "feed_forward.w2.weight", {c.dim, hidden}, SplitKind::kRow});
    specs.push_back({p + "feed_forward.w3.weight", {hidden, c.dim}, SplitKind::kColumn});
    specs.push_back({p + "attention_norm.weight", {c.dim}, SplitKind::kReplicated});
    specs.push_back({p + "ffn_norm.weight", {c.dim}, SplitKind::kReplicated});
  }
  specs.push_back({"norm.weight", {c.dim}, SplitKind::kReplicated});
  specs.push_back({"output.weight", {c.vocab_size, c.dim}, SplitKind::kColumn});
  return specs;
}

DimRange RankSlice(const TensorSpec& spec, const ModelConfig& c, int rank, int world_size) {
  const int dim = spec.split_dim();
  if (dim < 0) return {0, spec.shape.empty() ? 1 : spec.shape[0]};
  const int64_t extent = spec.shape[dim];
  if (spec.split == SplitKind::kKvColumn && world_size > c.n_kv_heads) {
    // Ranks outnumber KV heads: each rank holds the one head its query
    // heads use (query head q uses KV head q / (n_heads / n_kv_heads)).
    const int64_t head = static_cast<int64_t>(rank) * c.n_kv_heads / world_size;
    return {head * c.head_dim(), (head + 1) * c.head_dim()};
  }
  const int64_t part = extent / world_size;
  return {rank * part, (rank + 1) * part};
}

int64_t FirstKvHead(const ModelConfig& c, int rank, int world_size) {
  const TensorSpec kv{"", {c.n_kv_heads * c.head_dim(), c.dim}, SplitKind::kKvColumn};
  return RankSlice(kv, c, rank, world_size).begin / c.head_dim();
}

std::vector<int64_t> RankShape(const TensorSpec& spec, const ModelConfig& c, int rank, int world_size) {
  std::vector<int64_t> shape = spec.shape;
  const int dim = spec.split_dim();
  if (dim >= 0) {
    const DimRange range = RankSlice(spec, c, rank, world_size);
    shape[dim] = range.end - range.begin;
  }
  return shape;
}

}  // namespace llama
