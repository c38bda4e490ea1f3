// CUDA twins of the CPU kernels in ops/cpu/, with the same contracts (see
// there), on device pointers. Host-only header: callers need not be nvcc.
// Every launcher enqueues on `stream` and returns the launch's status with
// the kernel named; weights may be f32, f16 or bf16 (upcast on load), and
// activations are f32.

#ifndef LLAMA_OPS_CUDA_KERNELS_H_
#define LLAMA_OPS_CUDA_KERNELS_H_

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

// Rotates row r of x ([rows, heads, head_dim], Meta's interleaved pairs) for
// position positions[r]; cos/sin are [max_positions, head_dim / 2] tables.
absl::Status Rope(float* x, int64_t rows, int64_t heads, int64_t head_dim, const int32_t* positions, const float* cos,
                  const float* sin, cudaStream_t stream);

// gate = silu(gate) * up.
absl::Status SwiGlu(float* gate, const float* up, int64_t count, cudaStream_t stream);

// x += y.
absl::Status AddInPlace(float* x, const float* y, int64_t count, cudaStream_t stream);

// f32 -> bf16 or f16 (round to nearest even), for GEMM inputs.
absl::Status CastFromF32(const float* in, void* out, DType to, int64_t count, cudaStream_t stream);

// Causal attention of `len` new rows starting at `start_pos` over one
// sequence's cache ([capacity, n_kv_heads, head_dim]); q [len, n_heads,
// head_dim]; kv_head_of [n_heads] (device); out [len, n_heads * head_dim].
absl::Status Attention(const float* q, const float* k_cache, const float* v_cache, const int32_t* kv_head_of,
                       int64_t start_pos, int64_t len, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                       float* out, cudaStream_t stream);

// flags[index] |= 1 if any of x[0, count) is NaN or infinite (no host sync:
// the caller reads the flags once per step).
absl::Status FlagNonFinite(const float* x, int64_t count, int32_t* flags, int index, cudaStream_t stream);

// out[r] = argmax of row r of logits [rows, vocab] (first maximum on ties).
absl::Status ArgmaxRows(const float* logits, int64_t rows, int64_t vocab, int32_t* out, cudaStream_t stream);

// out[r] = log_softmax(row r)[tokens[r]].
absl::Status LogProbRows(const float* logits, int64_t rows, int64_t vocab, const int32_t* tokens, float* out,
                         cudaStream_t stream);

}  // namespace llama::cuda

#endif  // LLAMA_OPS_CUDA_KERNELS_H_
