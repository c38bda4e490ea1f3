// LayerOps on an NVIDIA GPU: the kernels of ops/cuda/ and cuBLAS on device
// buffers, collectives through NCCL, every op enqueued on the model's
// stream (so a decode step can be captured as a CUDA graph). The step's
// arrays are read from device copies (DeviceStepArrays) that the backend
// uploads before the step; the host StepPlan gives only the counts.
// CheckFinite raises a device flag, read back with the step's results.

#ifndef LLAMA_WORKER_MODEL_CUDA_LAYER_OPS_H_
#define LLAMA_WORKER_MODEL_CUDA_LAYER_OPS_H_

#include <cstdint>

#include "checkpoint/rank_geometry.h"
#include "ops/cuda/cublas_linear.h"
#include "ops/kv_cache_view.h"
#include "worker/collectives/nccl_communicator.h"
#include "worker/model/layer_ops.h"

struct CUstream_st;

namespace llama {

// Device arrays of the step (see StepPlan) plus the attention tiles of its
// prefill chunks (cuda::AttentionTiles, when ChooseAttentionKernel picks them).
struct DeviceStepArrays {
  const int32_t* tokens = nullptr;
  const int32_t* positions = nullptr;
  KvBlockTables tables;
  const int32_t* logit_rows = nullptr;
  const int32_t* tile_first = nullptr;
  const int32_t* tile_rows = nullptr;
  int64_t tiles = 0;
};

// The device-side constants the ops read (RoPE tables and the query-head
// -> KV-head map, uploaded once), and decode attention's scratch
// (cuda::DecodeAttentionScratchFloats for max_batch_size rows and the
// cache's max_positions).
struct DeviceModelTables {
  const float* rope_cos = nullptr;
  const float* rope_sin = nullptr;
  const int32_t* kv_head_of = nullptr;
  float* decode_scratch = nullptr;
  int64_t decode_rows = 0;  // The rows decode_scratch holds.
  int64_t max_positions = 0;
};

// The attention kernel a step runs (ops/cuda/attention.h): tiles for steps
// with prefill chunks, the context-split decode kernel for decode steps
// within the scratch's rows, else row by row. The tiled and split kernels
// take heads of up to kMaxFastAttentionHeadDim.
enum class AttentionKernel { kTiles, kDecodeSplits, kRows };
inline constexpr int64_t kMaxFastAttentionHeadDim = 128;
AttentionKernel ChooseAttentionKernel(const StepPlan& plan, int64_t head_dim, int64_t decode_rows);

class CudaLayerOps final : public LayerOps {
 public:
  // All pointers must outlive the ops; `nccl` is null for a world of one;
  // `gathered` is device scratch of max_step_tokens * max(dim, vocab)
  // floats; `flags` has n_layers + 1 device ints.
  CudaLayerOps(const RankGeometry& geometry, CUstream_st* stream, cuda::CublasLinear* linear, NcclCommunicator* nccl,
               const DeviceStepArrays* step, const DeviceModelTables& tables, float* gathered, int32_t* flags);

  absl::Status EmbeddingLookup(const StepPlan& plan, const Tensor& table, float* out) override;
  absl::Status RmsNorm(const float* x, const Tensor& weight, int64_t n, float* out) override;
  absl::Status Linear(const float* x, int64_t n, const Tensor& weight, float* y) override;
  absl::Status Linears(const float* x, int64_t n, absl::Span<const LinearTarget> targets) override;
  absl::Status Rope(const StepPlan& plan, float* x, int64_t heads) override;
  absl::Status StoreKv(const StepPlan& plan, const float* k, const float* v, const KvCacheView& cache) override;
  absl::Status Attention(const StepPlan& plan, const float* q, const KvCacheView& cache, float* out) override;
  absl::Status SwiGlu(float* gate, const float* up, int64_t count) override;
  absl::Status AddInPlace(float* x, const float* y, int64_t count) override;
  absl::Status AllReduceSum(float* x, int64_t rows, int64_t width) override;
  absl::Status GatherColumns(const float* local, int64_t n, int64_t width, float* full) override;
  absl::Status GatherLogitRows(const StepPlan& plan, const float* x, int64_t width, float* out) override;
  absl::Status CheckFinite(const float* x, int64_t count, int index) override;

 private:
  const RankGeometry& geometry_;
  CUstream_st* stream_;
  cuda::CublasLinear* linear_;
  NcclCommunicator* nccl_;
  const DeviceStepArrays* step_;
  DeviceModelTables tables_;
  float* gathered_;
  int32_t* flags_;
};

}  // namespace llama

#endif  // LLAMA_WORKER_MODEL_CUDA_LAYER_OPS_H_
