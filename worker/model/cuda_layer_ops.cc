#include "worker/model/cuda_layer_ops.h"

#include <cuda_runtime.h>

#include "absl/container/inlined_vector.h"
#include "base/status_macros.h"
#include "ops/cuda/attention.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/elementwise.h"
#include "ops/cuda/rope.h"

namespace llama {

CudaLayerOps::CudaLayerOps(const RankGeometry& geometry, CUstream_st* stream, cuda::CublasLinear* linear,
                           NcclCommunicator* nccl, const DeviceStepArrays* step, const DeviceModelTables& tables,
                           float* gathered, int32_t* flags)
    : geometry_(geometry),
      stream_(stream),
      linear_(linear),
      nccl_(nccl),
      step_(step),
      tables_(tables),
      gathered_(gathered),
      flags_(flags) {}

absl::Status CudaLayerOps::EmbeddingLookup(const StepPlan& plan, const Tensor& table, float* out) {
  return cuda::EmbeddingLookup(step_->tokens, plan.n(), table.raw(), table.dtype(), table.dim(1), out, stream_);
}

absl::Status CudaLayerOps::RmsNorm(const float* x, const Tensor& weight, int64_t n, float* out) {
  return cuda::RmsNorm(x, weight.raw(), weight.dtype(), n, geometry_.config.dim,
                       static_cast<float>(geometry_.config.norm_eps), out, stream_);
}

absl::Status CudaLayerOps::Linear(const float* x, int64_t n, const Tensor& weight, float* y) {
  return linear_->Run(x, n, weight.raw(), weight.dtype(), weight.dim(0), weight.dim(1), y);
}

absl::Status CudaLayerOps::Linears(const float* x, int64_t n, absl::Span<const LinearTarget> targets) {
  if (targets.empty()) return absl::OkStatus();
  // Weights of different dtypes or widths (never a Llama layer's q/k/v or
  // gate/up) run one at a time.
  const Tensor& first = *targets[0].weight;
  absl::InlinedVector<cuda::LinearOutput, cuda::kMaxGemvGroup> group;
  for (const LinearTarget& t : targets) {
    if (t.weight->dtype() != first.dtype() || t.weight->dim(1) != first.dim(1)) return LayerOps::Linears(x, n, targets);
    group.push_back({t.weight->raw(), t.weight->dim(0), t.y});
  }
  return linear_->RunGroup(x, n, first.dtype(), first.dim(1), group);
}

absl::Status CudaLayerOps::Rope(const StepPlan& plan, float* x, int64_t heads) {
  return cuda::Rope(x, plan.n(), heads, geometry_.head_dim, step_->positions, tables_.rope_cos, tables_.rope_sin,
                    stream_);
}

absl::Status CudaLayerOps::StoreKv(const StepPlan& plan, const float* k, const float* v, const KvCacheView& cache) {
  return cuda::StoreKv(k, v, plan.n(), geometry_.kv_width(), step_->tables, step_->positions, cache, stream_);
}

AttentionKernel ChooseAttentionKernel(const StepPlan& plan, int64_t head_dim, int64_t decode_rows) {
  if (head_dim > kMaxFastAttentionHeadDim) return AttentionKernel::kRows;
  if (!plan.decode_only) return AttentionKernel::kTiles;
  return plan.n() <= decode_rows ? AttentionKernel::kDecodeSplits : AttentionKernel::kRows;
}

absl::Status CudaLayerOps::Attention(const StepPlan& plan, const float* q, const KvCacheView& cache, float* out) {
  switch (ChooseAttentionKernel(plan, geometry_.head_dim, tables_.decode_rows)) {
    case AttentionKernel::kTiles:
      return cuda::AttentionTiles(q, step_->tile_first, step_->tile_rows, step_->tiles, step_->tables,
                                  step_->positions, cache, tables_.kv_head_of, geometry_.local_heads,
                                  geometry_.local_kv_heads, geometry_.head_dim, out, stream_);
    case AttentionKernel::kDecodeSplits:
      return cuda::DecodeAttention(q, plan.n(), step_->tables, step_->positions, cache, tables_.kv_head_of,
                                   geometry_.local_heads, geometry_.local_kv_heads, geometry_.head_dim,
                                   tables_.max_positions, tables_.decode_scratch, out, stream_);
    case AttentionKernel::kRows:
      break;
  }
  return cuda::Attention(q, plan.n(), step_->tables, step_->positions, cache, tables_.kv_head_of, geometry_.local_heads,
                         geometry_.local_kv_heads, geometry_.head_dim, out, stream_);
}

absl::Status CudaLayerOps::SwiGlu(float* gate, const float* up, int64_t count) {
  return cuda::SwiGlu(gate, up, count, stream_);
}

absl::Status CudaLayerOps::AddInPlace(float* x, const float* y, int64_t count) {
  return cuda::AddInPlace(x, y, count, stream_);
}

absl::Status CudaLayerOps::AllReduceSum(float* x, int64_t rows, int64_t width) {
  // NCCL picks its algorithm and chunks by size: not batch-invariant.
  return nccl_ == nullptr ? absl::OkStatus() : nccl_->AllReduceSum(x, rows * width);
}

absl::Status CudaLayerOps::GatherColumns(const float* local, int64_t n, int64_t width, float* full) {
  const int ws = geometry_.world_size;
  if (ws == 1) {
    if (full == local) return absl::OkStatus();
    return cuda::CudaCall(cudaMemcpyAsync(full, local, n * width * sizeof(float), cudaMemcpyDeviceToDevice, stream_),
                          "cudaMemcpyAsync");
  }
  RETURN_IF_ERROR(nccl_->AllGather(local, n * width, gathered_));
  // [ws][n][width] -> [n][ws * width]: one strided copy per rank.
  for (int r = 0; r < ws; ++r) {
    RETURN_IF_ERROR(cuda::CudaCall(cudaMemcpy2DAsync(full + r * width, ws * width * sizeof(float),
                                                     gathered_ + r * n * width, width * sizeof(float),
                                                     width * sizeof(float), n, cudaMemcpyDeviceToDevice, stream_),
                                   "cudaMemcpy2DAsync"));
  }
  return absl::OkStatus();
}

absl::Status CudaLayerOps::GatherLogitRows(const StepPlan& plan, const float* x, int64_t width, float* out) {
  return cuda::GatherRows(x, step_->logit_rows, plan.rows(), width, out, stream_);
}

absl::Status CudaLayerOps::CheckFinite(const float* x, int64_t count, int index) {
  return cuda::FlagNonFinite(x, count, flags_, index, stream_);
}

}  // namespace llama
