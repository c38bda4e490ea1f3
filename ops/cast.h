// Conversions between the floating-point element types of weights:
// f32, f16 (IEEE binary16) and bf16 (bfloat16).
//
// Narrowing rounds to nearest, ties to even, as PyTorch's .to() does, so a
// checkpoint converted here is bit-identical to one converted by PyTorch.
// NaN stays NaN (quiet); overflow becomes infinity.

#ifndef LLAMA_OPS_CAST_H_
#define LLAMA_OPS_CAST_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "absl/status/status.h"
#include "ops/dtype.h"

namespace llama {

inline float Bf16ToF32(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

inline uint16_t F32ToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float F16ToF32(uint16_t bits);
uint16_t F32ToF16(float value);

// The index of the first NaN or infinity among `count` elements of `data`
// (f32, f16 or bf16), or -1 if there is none. Reads only the exponent bits.
int64_t FindNonFinite(const void* data, DType dtype, size_t count);

// Converts `count` elements from `src` (of `from`) to `dst` (of `to`).
// Supported: any pair of f32, f16, bf16 (same type copies), and any of
// them to q8_0 (`count` a multiple of 32; quantize.h). Buffers must not
// overlap.
absl::Status CastElements(const void* src, DType from, void* dst, DType to, size_t count);

}  // namespace llama

#endif  // LLAMA_OPS_CAST_H_
