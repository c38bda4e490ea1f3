// Llama 2's tensors: their names, full (unsplit) shapes, and how fairscale
// splits them across model-parallel ranks:
//
//   tok_embeddings.weight        [vocab, dim]          split on dim 1 (ParallelEmbedding)
//   layers.N.attention.wq.weight [n_heads*hd, dim]     dim 0 (ColumnParallelLinear)
//   layers.N.attention.wk.weight [n_kv_heads*hd, dim]  dim 0; replicated per KV head
//   layers.N.attention.wv.weight [n_kv_heads*hd, dim]    when ranks outnumber KV heads
//   layers.N.attention.wo.weight [dim, n_heads*hd]     dim 1 (RowParallelLinear)
//   layers.N.feed_forward.w1     [hidden, dim]         dim 0
//   layers.N.feed_forward.w2     [dim, hidden]         dim 1
//   layers.N.feed_forward.w3     [hidden, dim]         dim 0
//   layers.N.attention_norm, ffn_norm, norm [dim]      replicated
//   output.weight                [vocab, dim]          dim 0
//
// Meta's shards also hold rope.freqs ([hd/2], the rotary frequencies),
// which the reference ignores and we recompute from rope_theta.

#ifndef LLAMA_CHECKPOINT_LLAMA_LAYOUT_H_
#define LLAMA_CHECKPOINT_LLAMA_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/model_config.h"

namespace llama {

inline constexpr char kRopeFreqsName[] = "rope.freqs";

enum class SplitKind {
  kReplicated,
  kColumn,     // Rows (dim 0) split evenly.
  kKvColumn,   // Rows split by KV head; a head is replicated when ranks outnumber heads.
  kRow,        // Columns (dim 1) split evenly.
  kEmbedding,  // Columns (dim 1) split evenly (ParallelEmbedding).
};

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;  // Full, as on one rank.
  SplitKind split;

  // The dimension the split applies to, or -1 when replicated.
  int split_dim() const;
};

// Every tensor of the model, in the reference's state-dict order. Needs a
// known vocab_size.
std::vector<TensorSpec> LlamaTensors(const ModelConfig& config);

// Half-open index range along split_dim() that `rank` of `world_size` holds
// (the whole dimension when replicated). CheckWorldSize must have passed.
struct DimRange {
  int64_t begin;
  int64_t end;
};
DimRange RankSlice(const TensorSpec& spec, const ModelConfig& config, int rank, int world_size);

// The global index of the first KV head `rank` holds.
int64_t FirstKvHead(const ModelConfig& config, int rank, int world_size);

// The shape `rank` holds.
std::vector<int64_t> RankShape(const TensorSpec& spec, const ModelConfig& config, int rank,
                               int world_size);

}  // namespace llama

#endif  // LLAMA_CHECKPOINT_LLAMA_LAYOUT_H_
