#include "ops/cuda/cuda_status.h"

#include <string>

#include "absl/strings/str_format.h"
#include "ops/cuda/cuda_libraries.h"

namespace llama::cuda {

absl::Status CudaCall(cudaError_t code, const char* call) {
  if (code == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrFormat("%s failed: %s (%s, code %d)", call,
                                             cudaGetErrorString(code), cudaGetErrorName(code),
                                             static_cast<int>(code)));
}

// A code came from the library, so it is open; its text describes the code.
absl::Status CublasCall(cublasStatus_t code, const char* call) {
  if (code == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const absl::StatusOr<const CublasLibrary*> cublas = Cublas();
  if (!cublas.ok()) return absl::InternalError(absl::StrFormat("%s failed: cuBLAS status %d", call, code));
  return absl::InternalError(absl::StrFormat("%s failed: %s (%s)", call, (*cublas)->cublasGetStatusString(code),
                                             (*cublas)->cublasGetStatusName(code)));
}

absl::Status NcclCall(ncclResult_t code, const char* call) {
  if (code == ncclSuccess) return absl::OkStatus();
  const absl::StatusOr<const NcclLibrary*> nccl = Nccl();
  if (!nccl.ok()) return absl::InternalError(absl::StrFormat("%s failed: NCCL result %d", call, code));
  // ncclGetLastError carries the detail (which peer, which transport).
  return absl::InternalError(absl::StrFormat("%s failed: %s: %s", call, (*nccl)->ncclGetErrorString(code),
                                             (*nccl)->ncclGetLastError(nullptr)));
}

absl::StatusOr<int> VisibleDeviceCount(std::string* why_none) {
  int count = 0;
  const cudaError_t code = cudaGetDeviceCount(&count);
  if (code == cudaErrorNoDevice || code == cudaErrorInsufficientDriver) {
    // Clear the sticky error so later runtime calls see a clean slate.
    cudaGetLastError();
    if (why_none != nullptr) *why_none = cudaGetErrorString(code);
    return 0;
  }
  if (code != cudaSuccess) return CudaCall(code, "cudaGetDeviceCount");
  if (count == 0 && why_none != nullptr) *why_none = "the CUDA runtime reports 0 devices";
  return count;
}

}  // namespace llama::cuda
