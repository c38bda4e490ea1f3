// y [1, out] = x [1, in] w^T for a decode step of one row, with f32 x and
// bf16 or f16 w, x kept in f32; several weights that read the same x (a
// layer's q/k/v, or gate/up) in one launch. Host-only header.
//
// At one row a linear layer reads every weight once and does almost no
// arithmetic, so its speed is the weights' read rate: one warp per output
// row streams the row in 16-byte loads (8 weights a lane), reduced across
// the warp at the end. cuBLAS at n = 1 needs x cast to 16 bits first (an
// extra kernel and a rounding the CPU does not do) and read the weights
// more slowly: on an H200, the 7B shape's decode step went 7.0 -> 6.2 ms.
// Several rows per warp were slower than cuBLAS (batch 8: 21 ms/step, the
// rows' x loads swamping L1), so batches stay with cuBLAS.
//
// A group is one launch, not one per weight: a decode step is ~18 kernels a
// layer, and each launch costs the GPU a ramp-up and a tail of idle SMs that
// the small q/k/v products (4096 rows = 512 blocks, under four per SM) do
// not amortise. Each row's sum is the same as alone, bit for bit.

#ifndef LLAMA_OPS_CUDA_GEMV_H_
#define LLAMA_OPS_CUDA_GEMV_H_

#include <cstdint>

#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "ops/dtype.h"

namespace llama::cuda {

// Whether Gemv takes this shape: n = 1, a 16-bit w, and in a multiple of 8
// (16-byte rows of w and x; cudaMalloc aligns the bases).
bool GemvTakes(int64_t n, DType dtype, int64_t in);

// The most weights one launch takes (q, k and v).
inline constexpr int kMaxGemvGroup = 3;

// One weight [out, in] of a group and where its product goes, both on the
// device.
struct LinearOutput {
  const void* w;
  int64_t out;
  float* y;
};

// y_i = x w_i^T for every weight of the group (1..kMaxGemvGroup, all of
// `dtype` and width `in`), in one launch. InvalidArgument when !GemvTakes
// or the group's size is out of range.
absl::Status Gemv(const float* x, int64_t n, DType dtype, int64_t in, absl::Span<const LinearOutput> group,
                  cudaStream_t stream);

}  // namespace llama::cuda

#endif  // LLAMA_OPS_CUDA_GEMV_H_
