// CUDA twin of ops/cpu/elementwise.h, with the same contracts, on device pointers.
// Host-only header: callers need not be nvcc. Every launcher enqueues on
// `stream` and returns the launch's status with the kernel named.
// Weights may be f32, f16 or bf16 (upcast on load); activations are f32.

#ifndef LLAMA_OPS_CUDA_ELEMENTWISE_H_
#define LLAMA_OPS_CUDA_ELEMENTWISE_H_

#include <cstdint>

#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "ops/dtype.h"

namespace llama::cuda {

// out[i, :] = table[tokens[i], :], table [vocab, width].
absl::Status EmbeddingLookup(const int32_t* tokens, int64_t n, const void* table, DType dtype, int64_t width,
                             float* out, cudaStream_t stream);

// out = x * rsqrt(mean(x^2) + eps) * weight per row of x [n, dim]; out may alias x.
absl::Status RmsNorm(const float* x, const void* weight, DType dtype, int64_t n, int64_t dim, float eps, float* out,
                     cudaStream_t stream);

// gate = silu(gate) * up.
absl::Status SwiGlu(float* gate, const float* up, int64_t count, cudaStream_t stream);

// x += y.
absl::Status AddInPlace(float* x, const float* y, int64_t count, cudaStream_t stream);

// f32 -> bf16 or f16 (round to nearest even), for GEMM inputs.
absl::Status CastFromF32(const float* in, void* out, DType to, int64_t count, cudaStream_t stream);

// out[i, :] = x[rows[i], :] for i < count; x and out [*, width].
absl::Status GatherRows(const float* x, const int32_t* rows, int64_t count, int64_t width, float* out,
                        cudaStream_t stream);

// flags[index] |= 1 if any of x[0, count) is NaN or infinite (no host sync:
// the caller reads the flags once per step).
absl::Status FlagNonFinite(const float* x, int64_t count, int32_t* flags, int index, cudaStream_t stream);

}  // namespace llama::cuda

#endif  // LLAMA_OPS_CUDA_ELEMENTWISE_H_
