// Llama's tensors: their names in Meta's, Hugging Face's and GGUF's
// naming, their full (unsplit) shapes, and how fairscale splits them across
// model-parallel ranks (LlamaTensorKinds below holds each fact once):
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
// Meta's names are ours (our shards keep them).

#ifndef LLAMA_CHECKPOINT_LLAMA_LAYOUT_H_
#define LLAMA_CHECKPOINT_LLAMA_LAYOUT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "checkpoint/model_config.h"

namespace llama {

// The rotary frequencies, which every format may carry and we recompute
// from rope_theta: Meta's shards hold rope.freqs ([hd/2], ignored by the
// reference too), older Hugging Face exports each layer's inv_freq; a GGUF
// file of a model with Llama 3.1's scaled RoPE needs llama.cpp's
// rope_freqs.weight (the scaling factors, gguf_llama.h).
inline constexpr char kRopeFreqsName[] = "rope.freqs";
inline constexpr char kHuggingFaceInverseFrequenciesName[] = "self_attn.rotary_emb.inv_freq";  // In a layer.
inline constexpr char kGgufRopeFactorsName[] = "rope_freqs.weight";

enum class SplitKind {
  kReplicated,
  kColumn,     // Rows (dim 0) split evenly.
  kKvColumn,   // Rows split by KV head; a head is replicated when ranks outnumber heads.
  kRow,        // Columns (dim 1) split evenly.
  kEmbedding,  // Columns (dim 1) split evenly (ParallelEmbedding).
};

// The formats whose tensor names we read or write.
enum class TensorNaming { kMeta, kHuggingFace, kGguf };

// What a tensor's dimensions are, in terms of the model config.
enum class Extent {
  kVocab,
  kDim,
  kQueryRows,  // n_heads * head_dim.
  kKvRows,     // n_kv_heads * head_dim.
  kHidden,     // The FFN width.
};

// Where a tensor sits in the state dict: around the layers or in each.
enum class TensorScope { kBeforeLayers, kPerLayer, kAfterLayers };

// One tensor of the model, or one of every layer.
struct LlamaTensorKind {
  TensorScope scope;
  // Meta's, Hugging Face's and GGUF's name (by TensorNaming); a layer's
  // tensors without their layer prefix ("attention.wq.weight").
  const char* names[3];
  std::vector<Extent> shape;
  SplitKind split;
  // Rows are query or key heads, which RoPE rotates: Hugging Face stores
  // each head's rows in "rotate half" order (hf_sources.cc).
  bool rotary_rows = false;

  const char* name(TensorNaming naming) const { return names[static_cast<int>(naming)]; }
};

// The table: every kind of tensor, in the reference's state-dict order
// (the per-layer ones in a layer's order).
const std::vector<LlamaTensorKind>& LlamaTensorKinds();

// A layer's tensor name split at its layer prefix ("layers.3." in Meta's
// naming, "model.layers.3." in Hugging Face's, "blk.3." in GGUF's).
struct LayerTensorName {
  int layer;
  absl::string_view name;  // Within the layer: "attention.wq.weight".
};
// Nullopt for a name outside the layers (or with no layer number >= 0).
std::optional<LayerTensorName> ParseLayerName(absl::string_view name, TensorNaming naming);

// `kind`'s full name in `naming` (`layer` for a per-layer kind).
std::string LlamaTensorName(const LlamaTensorKind& kind, int layer, TensorNaming naming);

// `name` of naming `from` renamed to naming `to`; nullopt when it names no
// tensor of a Llama model (nor the layer number a tensor of one).
std::optional<std::string> RenameTensor(absl::string_view name, TensorNaming from, TensorNaming to);

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;  // Full, as on one rank.
  SplitKind split;
  const LlamaTensorKind* kind = nullptr;  // Its row of the table.

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
