#include "ops/cuda/cuda_buffer.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace llama::cuda {

CudaBuffer::~CudaBuffer() {
  if (data_ == nullptr) return;
  if (kind_ == Kind::kDevice) {
    cudaFree(data_);
  } else {
    cudaFreeHost(data_);
  }
}

absl::Status CudaBuffer::Allocate(size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  if (kind_ == Kind::kPinnedHost) return CudaCall(cudaMallocHost(&data_, bytes), "cudaMallocHost");
  if (absl::Status s = CudaCall(cudaMalloc(&data_, bytes), "cudaMalloc"); !s.ok()) {
    return absl::ResourceExhaustedError(absl::StrFormat("%s (%d bytes)", s.message(), bytes));
  }
  return CudaCall(cudaMemset(data_, 0, bytes), "cudaMemset");
}

absl::Status CudaBuffer::Upload(const void* host, size_t bytes) {
  RETURN_IF_ERROR(Allocate(bytes));
  return CudaCall(cudaMemcpy(data_, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
}

}  // namespace llama::cuda
