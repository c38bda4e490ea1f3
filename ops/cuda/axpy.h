// y <- alpha * x + y on the device: the toolkit's smoke-test kernel, kept
// because the CUDA build rules need a real kernel to prove themselves.
//
// Host-only header: callers need not be compiled by nvcc.

#ifndef LLAMA_OPS_CUDA_AXPY_H_
#define LLAMA_OPS_CUDA_AXPY_H_

#include <cstdint>

#include <cuda_runtime.h>

namespace llama::cuda {

// x and y are device pointers to n floats. Asynchronous on `stream`;
// returns the launch status (cudaGetLastError after the launch).
cudaError_t LaunchAxpy(float alpha, const float* x, float* y, int64_t n, cudaStream_t stream);

}  // namespace llama::cuda

#endif  // LLAMA_OPS_CUDA_AXPY_H_
