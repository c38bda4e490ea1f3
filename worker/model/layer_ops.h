// The ops a Llama step is made of, with the same names and shapes on every
// device (CpuLayerOps, CudaLayerOps), so that the step itself is written
// once (llama_forward.h) as llama.cpp's build_llama is for every backend.
//
// Activations are f32 [rows, width] buffers in the device's memory; weights
// are Tensors whose data lives there too (a view of the mapped shard on the
// CPU, of uploaded copies on a GPU). Ops that need a step's tokens,
// positions or slots take the StepPlan: a device backend reads its own
// copies of the plan's arrays, uploaded before the step. An op may only
// enqueue its work (CUDA): its status is the launch's, and results are
// valid once the backend finishes the step.

#ifndef LLAMA_WORKER_MODEL_LAYER_OPS_H_
#define LLAMA_WORKER_MODEL_LAYER_OPS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "base/status_macros.h"
#include "ops/kv_cache_view.h"
#include "ops/tensor.h"
#include "worker/model/step_plan.h"

namespace llama {

// The step's work buffers, each [max_step_tokens, width]; their widths are
// listed once, in rank_plan.h's WorkBuffers.
struct Activations {
  float* x = nullptr;           // [dim] the residual stream
  float* xb = nullptr;          // [dim] normalised input of a block
  float* q = nullptr;           // [q_width]
  float* k = nullptr;           // [kv_width]
  float* v = nullptr;           // [kv_width]
  float* attention = nullptr;   // [q_width]
  float* projection = nullptr;  // [dim] a block's output before the residual
  float* gate = nullptr;        // [local_hidden]
  float* up = nullptr;          // [local_hidden]
  float* logits_local = nullptr;  // [local_vocab]
  float* logits = nullptr;      // [vocab]
  float* gathered = nullptr;    // [max(dim, vocab)] GatherColumns' full rows
  float* probabilities = nullptr;  // [vocab] a device sampler's; none on the CPU
};

// One linear of a group that reads the same input.
struct LinearTarget {
  const Tensor* weight;
  float* y;
};

// Where CheckFinite's `index` is, as its message says it: after a layer,
// or in the logits (index n_layers).
inline std::string FiniteCheckPlace(int index, int64_t n_layers, int rank) {
  return index < n_layers ? absl::StrFormat("after layer %d (rank %d)", index, rank)
                          : absl::StrFormat("in the logits (rank %d)", rank);
}

class LayerOps {
 public:
  virtual ~LayerOps() = default;

  // out[i] = this rank's columns of table[plan.tokens[i]].
  virtual absl::Status EmbeddingLookup(const StepPlan& plan, const Tensor& table, float* out) = 0;
  // out = x * rsqrt(mean(x^2) + eps) * weight, per row; out may alias x.
  virtual absl::Status RmsNorm(const float* x, const Tensor& weight, int64_t n, float* out) = 0;
  // y[n, out] = x[n, in] weight[out, in]^T.
  virtual absl::Status Linear(const float* x, int64_t n, const Tensor& weight, float* y) = 0;
  // Linear for each target, all of one input (q/k/v, gate/up): a device may
  // run them as one launch; each y is what Linear gives it.
  virtual absl::Status Linears(const float* x, int64_t n, absl::Span<const LinearTarget> targets) {
    for (const LinearTarget& t : targets) {
      RETURN_IF_ERROR(Linear(x, n, *t.weight, t.y));
    }
    return absl::OkStatus();
  }
  // Rotates row r of x ([n, heads, head_dim]) for position plan.positions[r].
  virtual absl::Status Rope(const StepPlan& plan, float* x, int64_t heads) = 0;
  // Writes row r of k and v into the cache at (plan.slots[r], plan.positions[r]).
  virtual absl::Status StoreKv(const StepPlan& plan, const float* k, const float* v, const KvCacheView& cache) = 0;
  // Causal attention of every row over its slot's cached positions [0, its position].
  virtual absl::Status Attention(const StepPlan& plan, const float* q, const KvCacheView& cache, float* out) = 0;
  // gate = silu(gate) * up.
  virtual absl::Status SwiGlu(float* gate, const float* up, int64_t count) = 0;
  // x += y.
  virtual absl::Status AddInPlace(float* x, const float* y, int64_t count) = 0;
  // Sums x ([rows, width]) over the ranks (row-parallel layers).
  virtual absl::Status AllReduceSum(float* x, int64_t rows, int64_t width) = 0;
  // Per-rank column slices [n, width] -> full rows [n, world_size * width].
  virtual absl::Status GatherColumns(const float* local, int64_t n, int64_t width, float* full) = 0;
  // out[i] = x[plan.logit_rows[i]], rows of `width`.
  virtual absl::Status GatherLogitRows(const StepPlan& plan, const float* x, int64_t width, float* out) = 0;
  // Fails the step if x holds a NaN or infinity: check `index` is the layer
  // it follows, or n_layers for the logits (a device may report at the end
  // of the step).
  virtual absl::Status CheckFinite(const float* x, int64_t count, int index) = 0;
};

}  // namespace llama

#endif  // LLAMA_WORKER_MODEL_LAYER_OPS_H_
