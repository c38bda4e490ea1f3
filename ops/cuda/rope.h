// CUDA twin of ops/rope_table.h, with the same contracts, on device pointers.
// Host-only header: callers need not be nvcc. Every launcher enqueues on
// `stream` and returns the launch's status with the kernel named.

#ifndef LLAMA_OPS_CUDA_ROPE_H_
#define LLAMA_OPS_CUDA_ROPE_H_

#include <cstdint>

#include <cuda_runtime.h>

#include "absl/status/status.h"

namespace llama::cuda {

// Rotates row r of x ([rows, heads, head_dim], Meta's interleaved pairs) for
// position positions[r]; cos/sin are [max_positions, head_dim / 2] tables.
absl::Status Rope(float* x, int64_t rows, int64_t heads, int64_t head_dim, const int32_t* positions, const float* cos,
                  const float* sin, cudaStream_t stream);

}  // namespace llama::cuda

#endif  // LLAMA_OPS_CUDA_ROPE_H_
