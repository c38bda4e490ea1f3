#include "worker/model/llama_forward.h"

#include "base/status_macros.h"

namespace llama {

absl::Status TransformerBlock(LayerOps& ops, const RankGeometry& geometry, const LayerWeights& w, int index,
                              const StepPlan& plan, const KvCacheView& cache, const Activations& a) {
  const int64_t n = plan.n(), dim = geometry.config.dim;
  // Attention.
  RETURN_IF_ERROR(ops.RmsNorm(a.x, w.attention_norm, n, a.xb));
  RETURN_IF_ERROR(ops.Linears(a.xb, n, {{&w.wq, a.q}, {&w.wk, a.k}, {&w.wv, a.v}}));
  RETURN_IF_ERROR(ops.Rope(plan, a.q, geometry.local_heads));
  RETURN_IF_ERROR(ops.Rope(plan, a.k, geometry.local_kv_heads));
  RETURN_IF_ERROR(ops.StoreKv(plan, a.k, a.v, cache));
  RETURN_IF_ERROR(ops.Attention(plan, a.q, cache, a.attention));
  RETURN_IF_ERROR(ops.Linear(a.attention, n, w.wo, a.projection));
  RETURN_IF_ERROR(ops.AllReduceSum(a.projection, n, dim));
  RETURN_IF_ERROR(ops.AddInPlace(a.x, a.projection, n * dim));
  // Feed-forward.
  RETURN_IF_ERROR(ops.RmsNorm(a.x, w.ffn_norm, n, a.xb));
  RETURN_IF_ERROR(ops.Linears(a.xb, n, {{&w.w1, a.gate}, {&w.w3, a.up}}));
  RETURN_IF_ERROR(ops.SwiGlu(a.gate, a.up, n * geometry.local_hidden));
  RETURN_IF_ERROR(ops.Linear(a.gate, n, w.w2, a.projection));
  RETURN_IF_ERROR(ops.AllReduceSum(a.projection, n, dim));
  RETURN_IF_ERROR(ops.AddInPlace(a.x, a.projection, n * dim));
  return ops.CheckFinite(a.x, n * dim, index);
}

absl::Status LlamaForward(LayerOps& ops, const RankGeometry& geometry, const ModelWeights& weights,
                          const StepPlan& plan, const std::vector<KvCacheView>& caches, const Activations& a) {
  const ModelConfig& c = geometry.config;
  const int64_t n = plan.n(), rows = plan.rows();
  // Each rank looks up its slice of the embedding dimension; gather the rows.
  RETURN_IF_ERROR(ops.EmbeddingLookup(plan, weights.tok_embeddings, a.xb));
  RETURN_IF_ERROR(ops.GatherColumns(a.xb, n, geometry.local_dim, a.x));
  for (int i = 0; i < c.n_layers; ++i) {
    RETURN_IF_ERROR(TransformerBlock(ops, geometry, weights.layers[i], i, plan, caches[i], a));
  }
  RETURN_IF_ERROR(ops.GatherLogitRows(plan, a.x, c.dim, a.xb));
  RETURN_IF_ERROR(ops.RmsNorm(a.xb, weights.norm, rows, a.xb));
  RETURN_IF_ERROR(ops.Linear(a.xb, rows, weights.output, a.logits_local));
  RETURN_IF_ERROR(ops.GatherColumns(a.logits_local, rows, geometry.local_vocab, a.logits));
  return ops.CheckFinite(a.logits, rows * c.vocab_size, c.n_layers);
}

}  // namespace llama
