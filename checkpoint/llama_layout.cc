#include "checkpoint/llama_layout.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace llama {
namespace {

// The layer prefix of each naming, by TensorNaming.
constexpr const char* kLayerPrefixes[] = {"layers.", "model.layers.", "blk."};

int64_t ExtentOf(Extent extent, const ModelConfig& c) {
  switch (extent) {
    case Extent::kVocab:
      return c.vocab_size;
    case Extent::kDim:
      return c.dim;
    case Extent::kQueryRows:
      return c.n_heads * c.head_dim();
    case Extent::kKvRows:
      return c.n_kv_heads * c.head_dim();
    case Extent::kHidden:
      return c.ffn_hidden_dim();
  }
  return 0;
}

TensorSpec SpecOf(const LlamaTensorKind& kind, int layer, const ModelConfig& c) {
  TensorSpec spec{LlamaTensorName(kind, layer, TensorNaming::kMeta), {}, kind.split, &kind};
  for (Extent extent : kind.shape) spec.shape.push_back(ExtentOf(extent, c));
  return spec;
}

}  // namespace

const std::vector<LlamaTensorKind>& LlamaTensorKinds() {
  using E = Extent;
  using S = SplitKind;
  static const std::vector<LlamaTensorKind> kKinds = {
      // scope, {Meta, Hugging Face, GGUF}, shape, split[, rotary rows]
      {TensorScope::kBeforeLayers, {"tok_embeddings.weight", "model.embed_tokens.weight", "token_embd.weight"},
       {E::kVocab, E::kDim}, S::kEmbedding},
      {TensorScope::kPerLayer, {"attention.wq.weight", "self_attn.q_proj.weight", "attn_q.weight"},
       {E::kQueryRows, E::kDim}, S::kColumn, /*rotary_rows=*/true},
      {TensorScope::kPerLayer, {"attention.wk.weight", "self_attn.k_proj.weight", "attn_k.weight"},
       {E::kKvRows, E::kDim}, S::kKvColumn, /*rotary_rows=*/true},
      {TensorScope::kPerLayer, {"attention.wv.weight", "self_attn.v_proj.weight", "attn_v.weight"},
       {E::kKvRows, E::kDim}, S::kKvColumn},
      {TensorScope::kPerLayer, {"attention.wo.weight", "self_attn.o_proj.weight", "attn_output.weight"},
       {E::kDim, E::kQueryRows}, S::kRow},
      {TensorScope::kPerLayer, {"feed_forward.w1.weight", "mlp.gate_proj.weight", "ffn_gate.weight"},
       {E::kHidden, E::kDim}, S::kColumn},
      {TensorScope::kPerLayer, {"feed_forward.w2.weight", "mlp.down_proj.weight", "ffn_down.weight"},
       {E::kDim, E::kHidden}, S::kRow},
      {TensorScope::kPerLayer, {"feed_forward.w3.weight", "mlp.up_proj.weight", "ffn_up.weight"},
       {E::kHidden, E::kDim}, S::kColumn},
      {TensorScope::kPerLayer, {"attention_norm.weight", "input_layernorm.weight", "attn_norm.weight"},
       {E::kDim}, S::kReplicated},
      {TensorScope::kPerLayer, {"ffn_norm.weight", "post_attention_layernorm.weight", "ffn_norm.weight"},
       {E::kDim}, S::kReplicated},
      {TensorScope::kAfterLayers, {"norm.weight", "model.norm.weight", "output_norm.weight"}, {E::kDim},
       S::kReplicated},
      {TensorScope::kAfterLayers, {"output.weight", "lm_head.weight", "output.weight"}, {E::kVocab, E::kDim},
       S::kColumn},
  };
  return kKinds;
}

std::optional<LayerTensorName> ParseLayerName(absl::string_view name, TensorNaming naming) {
  if (!absl::ConsumePrefix(&name, kLayerPrefixes[static_cast<int>(naming)])) return std::nullopt;
  const size_t dot = name.find('.');
  int layer;
  if (dot == absl::string_view::npos || !absl::SimpleAtoi(name.substr(0, dot), &layer) || layer < 0) {
    return std::nullopt;
  }
  return LayerTensorName{layer, name.substr(dot + 1)};
}

std::string LlamaTensorName(const LlamaTensorKind& kind, int layer, TensorNaming naming) {
  if (kind.scope != TensorScope::kPerLayer) return kind.name(naming);
  return absl::StrCat(kLayerPrefixes[static_cast<int>(naming)], layer, ".", kind.name(naming));
}

std::optional<std::string> RenameTensor(absl::string_view name, TensorNaming from, TensorNaming to) {
  for (const LlamaTensorKind& kind : LlamaTensorKinds()) {
    if (kind.scope != TensorScope::kPerLayer && name == kind.name(from)) return LlamaTensorName(kind, -1, to);
  }
  const std::optional<LayerTensorName> in_layer = ParseLayerName(name, from);
  if (!in_layer.has_value()) return std::nullopt;
  for (const LlamaTensorKind& kind : LlamaTensorKinds()) {
    if (kind.scope == TensorScope::kPerLayer && in_layer->name == kind.name(from)) {
      return LlamaTensorName(kind, in_layer->layer, to);
    }
  }
  return std::nullopt;
}

int TensorSpec::split_dim() const {
  if (split == SplitKind::kReplicated) return -1;
  return split == SplitKind::kColumn || split == SplitKind::kKvColumn ? 0 : 1;
}

std::vector<TensorSpec> LlamaTensors(const ModelConfig& c) {
  std::vector<TensorSpec> specs;
  const auto add_scope = [&](TensorScope scope, int layer) {
    for (const LlamaTensorKind& kind : LlamaTensorKinds()) {
      if (kind.scope == scope) specs.push_back(SpecOf(kind, layer, c));
    }
  };
  add_scope(TensorScope::kBeforeLayers, -1);
  for (int layer = 0; layer < c.n_layers; ++layer) add_scope(TensorScope::kPerLayer, layer);
  add_scope(TensorScope::kAfterLayers, -1);
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
