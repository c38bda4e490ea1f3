// Rotary embedding: one block per row, every head of it.

#include "ops/cuda/rope.h"

#include "ops/cuda/device_util.cuh"

namespace llama::cuda {
namespace {

__global__ void RopeKernel(float* x, int64_t heads, int64_t head_dim, const int32_t* positions, const float* cos,
                           const float* sin) {
  const int64_t row = blockIdx.x, half = head_dim / 2;
  const float* c = cos + static_cast<int64_t>(positions[row]) * half;
  const float* s = sin + static_cast<int64_t>(positions[row]) * half;
  for (int64_t j = threadIdx.x; j < heads * half; j += blockDim.x) {
    const int64_t h = j / half, i = j % half;
    float* v = x + (row * heads + h) * head_dim;
    const float re = v[2 * i], im = v[2 * i + 1];
    v[2 * i] = re * c[i] - im * s[i];
    v[2 * i + 1] = re * s[i] + im * c[i];
  }
}


}  // namespace

absl::Status Rope(float* x, int64_t rows, int64_t heads, int64_t head_dim, const int32_t* positions, const float* cos,
                  const float* sin, cudaStream_t stream) {
  if (rows == 0) return absl::OkStatus();
  RopeKernel<<<rows, kThreads, 0, stream>>>(x, heads, head_dim, positions, cos, sin);
  return Launched("RopeKernel");
}

}  // namespace llama::cuda
