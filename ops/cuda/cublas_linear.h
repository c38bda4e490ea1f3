// y = x W^T on the GPU, for activations x [n, in] (f32) and a weight
// W [out, in] in f32, f16 or bf16 on the device. One row (a batch-1 decode
// step) with 16-bit weights goes to Gemv (gemv.h: x kept in f32); otherwise
// cuBLAS. Linears that read the same x (q/k/v, gate/up) run as a group: one
// Gemv launch, or x cast once for all their GEMMs.
// 16-bit weights take x cast to their type (the tensor cores' inputs) and
// accumulate in f32 into an f32 y; f32 weights use an f32 GEMM without TF32.

#ifndef LLAMA_OPS_CUDA_CUBLAS_LINEAR_H_
#define LLAMA_OPS_CUDA_CUBLAS_LINEAR_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ops/cuda/gemv.h"
#include "ops/dtype.h"

struct cublasContext;
struct CUstream_st;

namespace llama::cuda {

struct CublasLibrary;

// Owns a cuBLAS handle bound to one stream and the scratch for casting x.
// Not thread-safe.
class CublasLinear {
 public:
  // `max_input_elements` bounds n * in of any Run (sizes the scratch).
  static absl::StatusOr<std::unique_ptr<CublasLinear>> Create(CUstream_st* stream, int64_t max_input_elements);
  ~CublasLinear();
  CublasLinear(const CublasLinear&) = delete;
  CublasLinear& operator=(const CublasLinear&) = delete;

  // Whether Run rounds x to the weights' 16-bit type for this shape.
  static bool RoundsInput(int64_t n, DType dtype, int64_t in);

  // y [n, out] = x [n, in] * w^T, all device pointers.
  absl::Status Run(const float* x, int64_t n, const void* w, DType dtype, int64_t out, int64_t in, float* y);
  // y_i [n, out_i] = x [n, in] * w_i^T for each weight of the group, all of
  // `dtype` and width `in`; each y_i is what Run gives it, bit for bit.
  absl::Status RunGroup(const float* x, int64_t n, DType dtype, int64_t in, absl::Span<const LinearOutput> group);

 private:
  CublasLinear() = default;

  const CublasLibrary* cublas_ = nullptr;  // Opened by Create (cuda_libraries.h).
  cublasContext* handle_ = nullptr;
  CUstream_st* stream_ = nullptr;
  void* scratch_ = nullptr;
  void* workspace_ = nullptr;
  int64_t scratch_elements_ = 0;
};

}  // namespace llama::cuda

#endif  // LLAMA_OPS_CUDA_CUBLAS_LINEAR_H_
