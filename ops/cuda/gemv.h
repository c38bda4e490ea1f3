// y [1, out] = x [1, in] w^T for a decode step of one row, with f32 x and
// bf16 or f16 w, x kept in f32. Host-only header.
//
// At one row a linear layer reads every weight once and does almost no
// arithmetic, so its speed is the weights' read rate: one warp per output
// row streams the row in 16-byte loads (8 weights a lane), reduced across
// the warp at the end. cuBLAS at n = 1 needs x cast to 16 bits first (an
// extra kernel and a rounding the CPU does not do) and read the weights
// more slowly: on an H200, the 7B shape's decode step went 7.0 -> 6.2 ms.
// Several rows per warp were slower than cuBLAS (batch 8: 21 ms/step, the
// rows' x loads swamping L1), so batches stay with cuBLAS.

#ifndef LLAMA_OPS_CUDA_GEMV_H_
#define LLAMA_OPS_CUDA_GEMV_H_

#include <cstdint>

#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "ops/dtype.h"

namespace llama::cuda {

// Whether Gemv takes this shape: n = 1, a 16-bit w, and in a multiple of 8
// (16-byte rows of w and x; cudaMalloc aligns the bases).
bool GemvTakes(int64_t n, DType dtype, int64_t in);

// All device pointers; InvalidArgument when !GemvTakes.
absl::Status Gemv(const float* x, int64_t n, const void* w, DType dtype, int64_t out, int64_t in, float* y,
                  cudaStream_t stream);

}  // namespace llama::cuda

#endif  // LLAMA_OPS_CUDA_GEMV_H_
