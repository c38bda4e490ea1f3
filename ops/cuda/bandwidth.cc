#include "ops/cuda/bandwidth.h"

#include <cuda_runtime.h>

#include <algorithm>

#include "ops/cuda/cuda_status.h"

namespace llama::cuda {

absl::StatusOr<double> MeasureCopyBandwidth(size_t bytes) {
  void* from = nullptr;
  void* to = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  absl::Status s = CudaCall(cudaMalloc(&from, bytes), "cudaMalloc");
  if (s.ok()) s = CudaCall(cudaMalloc(&to, bytes), "cudaMalloc");
  if (s.ok()) s = CudaCall(cudaMemset(from, 1, bytes), "cudaMemset");
  if (s.ok()) s = CudaCall(cudaEventCreate(&start), "cudaEventCreate");
  if (s.ok()) s = CudaCall(cudaEventCreate(&stop), "cudaEventCreate");
  double best = 0;
  for (int round = 0; round < 4 && s.ok(); ++round) {
    s = CudaCall(cudaEventRecord(start), "cudaEventRecord");
    if (s.ok()) s = CudaCall(cudaMemcpy(to, from, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy");
    if (s.ok()) s = CudaCall(cudaEventRecord(stop), "cudaEventRecord");
    if (s.ok()) s = CudaCall(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    if (s.ok()) s = CudaCall(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    if (s.ok() && round > 0) best = std::max(best, 2.0 * bytes / (ms / 1e3) / 1e9);  // Round 0 warms up.
  }
  if (start != nullptr) cudaEventDestroy(start);
  if (stop != nullptr) cudaEventDestroy(stop);
  cudaFree(from);
  cudaFree(to);
  if (!s.ok()) return s;
  return best;
}

}  // namespace llama::cuda
