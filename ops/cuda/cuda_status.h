// Turns CUDA runtime, cuBLAS and NCCL return codes into absl::Status.
//
// Every call into those libraries goes through one of these, so an error
// names the call that failed and the library's own text for the code:
//   RETURN_IF_ERROR(CudaCall(cudaMalloc(&p, n), "cudaMalloc"));  (base/status_macros.h)

#ifndef LLAMA_OPS_CUDA_CUDA_STATUS_H_
#define LLAMA_OPS_CUDA_CUDA_STATUS_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace llama::cuda {

// OK for cudaSuccess; otherwise an error whose message starts with `call`.
absl::Status CudaCall(cudaError_t code, const char* call);
absl::Status CublasCall(cublasStatus_t code, const char* call);
absl::Status NcclCall(ncclResult_t code, const char* call);

// Number of CUDA devices this process can see. No driver or no device is
// not an error: it is 0 devices, with `why_none` (when given) set to the
// runtime's explanation. Anything else the runtime reports is an error.
absl::StatusOr<int> VisibleDeviceCount(std::string* why_none = nullptr);

}  // namespace llama::cuda

#endif  // LLAMA_OPS_CUDA_CUDA_STATUS_H_
