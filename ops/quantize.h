// Q8_0 quantization (dtype.h's kQ8_0), as llama.cpp's reference quantizer
// does it, so our int8 weights and GGUF's Q8_0 are the same bytes: per
// block of 32 values, d = max|x| / 127 stored as f16, q = round(x / d)
// computed with the unrounded d. And Q4_K and Q6_K (kQ4_K, kQ6_K),
// llama.cpp's layouts with our own choice of scales.

#ifndef LLAMA_OPS_QUANTIZE_H_
#define LLAMA_OPS_QUANTIZE_H_

#include <cmath>
#include <cstdint>

#include "absl/status/status.h"

namespace llama {

// 1 / d, the factor the quantizers scale a block by; 0 where d is 0 or so
// small (max|v| under ~3.7e-37) that 1 / d overflows, so that such a
// block's values round to 0 in every kernel version rather than to
// whatever v * inf (or 0 * inf, NaN) happens to convert to.
inline float InverseScale(float d) {
  const float id = d != 0 ? 1 / d : 0;
  return std::isinf(id) ? 0 : id;
}

// One block of 32 values by that rule: writes q = round(v / d) and returns
// d (unrounded; activations keep it in f32). Values must be finite.
float QuantizeBlock(const float* v, int8_t* q);

// `n` (a multiple of 32) values into n / 32 blocks at `out`. A NaN or
// infinity is an error naming its index (it cannot be represented).
absl::Status QuantizeQ8_0(const float* x, int64_t n, uint8_t* out);

// n / 32 blocks back to `n` values.
void DequantizeQ8_0(const uint8_t* blocks, int64_t n, float* out);

// `n` (a multiple of 256) values into n / 256 Q4_K super-blocks at `out`
// (value = d * scale * q - dmin * min, q in 0..15, a 6-bit scale and
// minimum per 32 values). Each sub-block's scale and minimum are the
// least-squares fit of its values over a few candidate roundings (the one
// with the smallest squared error kept), then rounded to the super-block's
// 6-bit steps and the values rounded again against them. A NaN or infinity
// is an error naming its index.
absl::Status QuantizeQ4_K(const float* x, int64_t n, uint8_t* out);

// `n` (a multiple of 256) values into n / 256 Q6_K super-blocks (value =
// d * scale * q, q in -32..31, an int8 scale per 16 values): each
// sub-block's scale is the least-squares fit over a few candidate
// roundings, then rounded to the super-block's steps of d = max scale / 127
// and the values rounded again against it. A NaN or infinity is an error
// naming its index.
absl::Status QuantizeQ6_K(const float* x, int64_t n, uint8_t* out);

}  // namespace llama

#endif  // LLAMA_OPS_QUANTIZE_H_
