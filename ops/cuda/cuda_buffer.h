// Owners of CUDA memory: device memory (cudaMalloc, zeroed) or page-locked
// host memory (cudaMallocHost: copies from and to it are asynchronous and
// can be captured in a graph at fixed addresses), each freed with its
// match; and a step's host/device pair of one array (Mirrored).

#ifndef LLAMA_OPS_CUDA_CUDA_BUFFER_H_
#define LLAMA_OPS_CUDA_CUDA_BUFFER_H_

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "ops/cuda/cuda_status.h"

namespace llama::cuda {

class CudaBuffer {
 public:
  enum class Kind { kDevice, kPinnedHost };
  explicit CudaBuffer(Kind kind = Kind::kDevice) : kind_(kind) {}
  ~CudaBuffer();
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;
  CudaBuffer(CudaBuffer&& other) noexcept : kind_(other.kind_), data_(std::exchange(other.data_, nullptr)) {}

  // At least one byte, zeroed on the device.
  absl::Status Allocate(size_t bytes);
  // Device memory only.
  absl::Status Upload(const void* host, size_t bytes);
  template <typename T = float>
  T* get() const {
    return static_cast<T*>(data_);
  }

 private:
  Kind kind_;
  void* data_ = nullptr;
};

// A step's inputs and outputs that cross between host and device: a pinned
// staging buffer and a device buffer each, [capacity] elements of T.
template <typename T>
struct Mirrored {
  CudaBuffer host{CudaBuffer::Kind::kPinnedHost};
  CudaBuffer device;
  absl::Status Allocate(int64_t capacity) {
    absl::Status s = host.Allocate(capacity * sizeof(T));
    if (s.ok()) s = device.Allocate(capacity * sizeof(T));
    return s;
  }
  T* staged() const { return host.get<T>(); }
  T* on_device() const { return device.get<T>(); }
  absl::Status Upload(int64_t count, cudaStream_t stream) const {
    return CudaCall(cudaMemcpyAsync(on_device(), staged(), count * sizeof(T), cudaMemcpyHostToDevice, stream),
                    "cudaMemcpyAsync(host to device)");
  }
  absl::Status Download(int64_t count, cudaStream_t stream) const {
    return CudaCall(cudaMemcpyAsync(staged(), on_device(), count * sizeof(T), cudaMemcpyDeviceToHost, stream),
                    "cudaMemcpyAsync(device to host)");
  }
};

}  // namespace llama::cuda

#endif  // LLAMA_OPS_CUDA_CUDA_BUFFER_H_
