#include "ops/cuda/axpy.h"

namespace llama::cuda {
namespace {

__global__ void AxpyKernel(float alpha, const float* __restrict__ x, float* __restrict__ y,
                           int64_t n) {
  // Grid-stride loop: any n works with a capped grid.
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    y[i] = alpha * x[i] + y[i];
  }
}

}  // namespace

cudaError_t LaunchAxpy(float alpha, const float* x, float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const int64_t wanted = (n + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(wanted < 65535 ? wanted : 65535);
  AxpyKernel<<<blocks, kThreads, 0, stream>>>(alpha, x, y, n);
  return cudaGetLastError();
}

}  // namespace llama::cuda
