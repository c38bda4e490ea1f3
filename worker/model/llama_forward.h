// One Llama 2 step of one tensor-parallel rank, written once for every
// device over LayerOps (model.py's Transformer.forward and
// TransformerBlock.forward, with fairscale's parallel layers):
//
//   h = tok_embeddings(tokens)                      (parallel embedding + all-gather)
//   for each layer:
//     h = h + wo(attention(rope(wq x), rope(wk x), wv x))   x = attention_norm(h)
//     h = h + w2(silu(w1 x) * w3 x)                         x = ffn_norm(h)
//   logits = output(norm(h))                         (column-parallel + all-gather)
//
// with wo and w2 all-reduced across ranks (row-parallel). Only the plan's
// logit rows go through the final norm and output.

#ifndef LLAMA_WORKER_MODEL_LLAMA_FORWARD_H_
#define LLAMA_WORKER_MODEL_LLAMA_FORWARD_H_

#include <vector>

#include "absl/status/status.h"
#include "checkpoint/rank_geometry.h"
#include "ops/kv_cache_view.h"
#include "worker/model/layer_ops.h"
#include "worker/model/model_weights.h"
#include "worker/model/step_plan.h"

namespace llama {

// One layer: `cache` is its KV cache.
absl::Status TransformerBlock(LayerOps& ops, const RankGeometry& geometry, const LayerWeights& w, int index,
                              const StepPlan& plan, const KvCacheView& cache, const Activations& a);

// The whole step: a.logits holds [plan.rows(), vocab] once the backend has
// finished it. `caches` has one view per layer.
absl::Status LlamaForward(LayerOps& ops, const RankGeometry& geometry, const ModelWeights& weights,
                          const StepPlan& plan, const std::vector<KvCacheView>& caches, const Activations& a);

}  // namespace llama

#endif  // LLAMA_WORKER_MODEL_LLAMA_FORWARD_H_
