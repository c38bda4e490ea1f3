// Row-wise CPU kernels of the Llama 2 block: embedding lookup, RMSNorm,
// SwiGLU, residual add, and a finiteness check. Activations are f32
// [tokens, features]; weights may be f32, f16 or bf16 (upcast on load).

#ifndef LLAMA_OPS_CPU_ELEMENTWISE_H_
#define LLAMA_OPS_CPU_ELEMENTWISE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "ops/tensor.h"

namespace llama::cpu {

// out[i, :] = table[tokens[i], :] for a table [vocab, width]. Token ids
// must be in range (the generator checks them).
void EmbeddingLookup(const Tensor& table, absl::Span<const int> tokens, float* out);

// out = x * rsqrt(mean(x^2) + eps) * weight, per row of x [n, dim]; the
// reference's RMSNorm in f32. `out` may alias `x`.
void RmsNorm(const float* x, const Tensor& weight, int64_t n, int64_t dim, float eps, float* out);

// gate[i] = silu(gate[i]) * up[i]: the reference's F.silu(w1(x)) * w3(x).
void SwiGlu(float* gate, const float* up, int64_t count);

// x[i] += y[i].
void AddInPlace(float* x, const float* y, int64_t count);

// OK if every value is finite; else an error naming `where` and the first
// bad index and value.
absl::Status CheckFinite(const float* x, int64_t count, absl::string_view where);

// Loads element i of a f32/f16/bf16 tensor as float.
float LoadAsFloat(const Tensor& t, int64_t i);

// Copies `count` elements starting at element `offset` of a f32/f16/bf16
// tensor into `out` as f32.
void LoadRow(const Tensor& t, int64_t offset, int64_t count, float* out);

}  // namespace llama::cpu

#endif  // LLAMA_OPS_CPU_ELEMENTWISE_H_
