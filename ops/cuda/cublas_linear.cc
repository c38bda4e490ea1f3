#include "ops/cuda/cublas_linear.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "ops/cuda/cuda_libraries.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/elementwise.h"
#include "ops/cuda/gemv.h"

namespace llama::cuda {

absl::StatusOr<std::unique_ptr<CublasLinear>> CublasLinear::Create(CUstream_st* stream, int64_t max_input_elements) {
  auto linear = std::unique_ptr<CublasLinear>(new CublasLinear());
  linear->stream_ = stream;
  ASSIGN_OR_RETURN(linear->cublas_, Cublas());
  RETURN_IF_ERROR(CublasCall(linear->cublas_->cublasCreate(&linear->handle_), "cublasCreate"));
  RETURN_IF_ERROR(CublasCall(linear->cublas_->cublasSetStream(linear->handle_, stream), "cublasSetStream"));
  // Exact f32 for f32 weights: no TF32 rounding of the inputs.
  RETURN_IF_ERROR(CublasCall(linear->cublas_->cublasSetMathMode(linear->handle_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode"));
  // A workspace of our own: cuBLAS must not allocate while a CUDA graph is
  // being captured (32 MiB: NVIDIA's recommendation for Hopper).
  constexpr size_t kWorkspaceBytes = 32 << 20;
  RETURN_IF_ERROR(CudaCall(cudaMalloc(&linear->workspace_, kWorkspaceBytes), "cudaMalloc"));
  RETURN_IF_ERROR(CublasCall(linear->cublas_->cublasSetWorkspace(linear->handle_, linear->workspace_, kWorkspaceBytes), "cublasSetWorkspace"));
  RETURN_IF_ERROR(CudaCall(cudaMalloc(&linear->scratch_, max_input_elements * 2), "cudaMalloc"));
  linear->scratch_elements_ = max_input_elements;
  return linear;
}

CublasLinear::~CublasLinear() {
  if (handle_ != nullptr) cublas_->cublasDestroy(handle_);
  if (scratch_ != nullptr) cudaFree(scratch_);
  if (workspace_ != nullptr) cudaFree(workspace_);
}

bool CublasLinear::RoundsInput(int64_t n, DType dtype, int64_t in) {
  return dtype != DType::kF32 && !GemvTakes(n, dtype, in);
}

absl::Status CublasLinear::Run(const float* x, int64_t n, const void* w, DType dtype, int64_t out, int64_t in,
                               float* y) {
  const LinearOutput output{w, out, y};
  return RunGroup(x, n, dtype, in, {&output, 1});
}

absl::Status CublasLinear::RunGroup(const float* x, int64_t n, DType dtype, int64_t in,
                                    absl::Span<const LinearOutput> group) {
  if (dtype != DType::kF32 && dtype != DType::kBF16 && dtype != DType::kF16) {
    return absl::InvalidArgumentError(absl::StrFormat("CublasLinear: %s weights", DTypeName(dtype)));
  }
  if (GemvTakes(n, dtype, in)) {
    for (size_t first = 0; first < group.size(); first += kMaxGemvGroup) {
      RETURN_IF_ERROR(Gemv(x, n, dtype, in, group.subspan(first, kMaxGemvGroup), stream_));
    }
    return absl::OkStatus();
  }
  // f32 weights: an f32 GEMM of x as it is. 16-bit weights: x cast to their
  // type once for the whole group (the tensor cores' inputs).
  const void* input = x;
  cudaDataType type = CUDA_R_32F;
  if (dtype != DType::kF32) {
    if (n * in > scratch_elements_) {
      return absl::InvalidArgumentError(
          absl::StrFormat("CublasLinear: input of %d elements exceeds the %d planned", n * in, scratch_elements_));
    }
    RETURN_IF_ERROR(CastFromF32(x, scratch_, dtype, n * in, stream_));
    input = scratch_;
    type = dtype == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F;
  }
  const float one = 1.0f, zero = 0.0f;
  for (const LinearOutput& o : group) {
    // Row-major y[n, out] = x[n, in] w[out, in]^T is, column-major,
    // y^T[out, n] = (w^T[in, out])^T x^T[in, n]: A = w (transposed), B = x.
    RETURN_IF_ERROR(CublasCall(cublas_->cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, o.out, n, in, &one, o.w, type, in,
                                            input, type, in, &zero, o.y, CUDA_R_32F, o.out, CUBLAS_COMPUTE_32F,
                                            CUBLAS_GEMM_DEFAULT),
                               dtype == DType::kF32 ? "cublasGemmEx(f32)" : "cublasGemmEx(16-bit)"));
  }
  return absl::OkStatus();
}

}  // namespace llama::cuda
