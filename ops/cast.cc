#include "ops/cast.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "ops/quantize.h"

namespace llama {

float F16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1Fu;
  uint32_t mantissa = h & 0x3FFu;
  uint32_t bits;
  if (exponent == 0x1F) {  // Inf or NaN.
    bits = sign | 0x7F800000u | (mantissa << 13);
  } else if (exponent != 0) {  // Normal.
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {  // Zero.
    bits = sign;
  } else {  // Subnormal: normalise.
    exponent = 113;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --exponent;
    }
    bits = sign | (exponent << 23) | ((mantissa & 0x3FFu) << 13);
  }
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

uint16_t F32ToF16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return sign | 0x7E00u;              // NaN
  if (abs >= 0x477FF000u) return sign | 0x7C00u;             // Rounds to >= 65520: infinity.
  if (abs >= 0x38800000u) {                                  // Normal half (>= 2^-14).
    const uint32_t rounded = abs + 0xFFFu + ((abs >> 13) & 1u);
    return sign | static_cast<uint16_t>((rounded - 0x38000000u) >> 13);
  }
  if (abs < 0x33000000u) return sign;  // Below half the smallest subnormal: zero.
  // Subnormal half: shift the full mantissa into place, rounding to even.
  const uint32_t exponent = abs >> 23;
  const uint32_t mantissa = (abs & 0x7FFFFFu) | 0x800000u;
  // value = mantissa * 2^(exponent - 150) = k * 2^-24, so k = mantissa >> (126 - exponent).
  const uint32_t shift = 126 - exponent;  // In [14, 24] here.
  const uint32_t half_ulp = 1u << (shift - 1);
  uint32_t result = mantissa >> shift;
  const uint32_t rest = mantissa & ((1u << shift) - 1);
  if (rest > half_ulp || (rest == half_ulp && (result & 1u))) ++result;
  return sign | static_cast<uint16_t>(result);
}

namespace {

float LoadElement(const void* src, DType dtype, size_t i) {
  switch (dtype) {
    case DType::kF32:
      return static_cast<const float*>(src)[i];
    case DType::kF16:
      return F16ToF32(static_cast<const uint16_t*>(src)[i]);
    default:
      return Bf16ToF32(static_cast<const uint16_t*>(src)[i]);
  }
}

}  // namespace

namespace {

// Written as a search over whole blocks first (an OR of the masked bits, so
// the compiler vectorises it), then the element within the block.
template <typename Bits>
int64_t FindAllOnesExponent(const Bits* bits, size_t count, Bits exponent) {
  constexpr size_t kBlock = 256;
  for (size_t begin = 0; begin < count; begin += kBlock) {
    const size_t end = std::min(count, begin + kBlock);
    bool any = false;
    for (size_t i = begin; i < end; ++i) any |= (bits[i] & exponent) == exponent;
    if (!any) continue;
    for (size_t i = begin; i < end; ++i) {
      if ((bits[i] & exponent) == exponent) return static_cast<int64_t>(i);
    }
  }
  return -1;
}

}  // namespace

int64_t FindNonFinite(const void* data, DType dtype, size_t count) {
  switch (dtype) {
    case DType::kF32:
      return FindAllOnesExponent(static_cast<const uint32_t*>(data), count, uint32_t{0x7F800000u});
    case DType::kF16:
      return FindAllOnesExponent(static_cast<const uint16_t*>(data), count, uint16_t{0x7C00u});
    case DType::kBF16:
      return FindAllOnesExponent(static_cast<const uint16_t*>(data), count, uint16_t{0x7F80u});
    default:
      return -1;
  }
}

absl::Status CastElements(const void* src, DType from, void* dst, DType to, size_t count) {
  if (IsBlockDType(to) && count % BlockElements(to) != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s needs a multiple of %d values, not %d", DTypeName(to), BlockElements(to), count));
  }
  if (from == to && IsBlockDType(to)) {  // Whole blocks, copied (a GGUF's Q8_0 or Q4_K into shards).
    std::memcpy(dst, src, TensorBytes(from, count));
    return absl::OkStatus();
  }
  if (IsBlockDType(to) && IsFloat16Or32(from)) {
    const int64_t unit = BlockElements(to);
    const uint64_t unit_bytes = TensorBytes(to, unit);
    float block[kQ4KBlockElements];
    for (size_t b = 0; b < count / unit; ++b) {
      for (int64_t i = 0; i < unit; ++i) block[i] = LoadElement(src, from, b * unit + i);
      uint8_t* out = static_cast<uint8_t*>(dst) + b * unit_bytes;
      const absl::Status s = to == DType::kQ8_0   ? QuantizeQ8_0(block, unit, out)
                             : to == DType::kQ4_K ? QuantizeQ4_K(block, unit, out)
                                                  : QuantizeQ6_K(block, unit, out);
      if (!s.ok()) {
        return absl::InvalidArgumentError(
            absl::StrFormat("element %d is not finite: it cannot be quantized", b * unit));
      }
    }
    return absl::OkStatus();
  }
  if (!IsFloat16Or32(from) || !IsFloat16Or32(to)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cannot convert %s to %s (only f32, f16 and bf16, and those to q8_0, q4_k and q6_k)", DTypeName(from), DTypeName(to)));
  }
  if (from == to) {
    std::memcpy(dst, src, count * DTypeSize(from));
    return absl::OkStatus();
  }
  for (size_t i = 0; i < count; ++i) {
    const float value = LoadElement(src, from, i);
    switch (to) {
      case DType::kF32:
        static_cast<float*>(dst)[i] = value;
        break;
      case DType::kF16:
        static_cast<uint16_t*>(dst)[i] = F32ToF16(value);
        break;
      default:
        static_cast<uint16_t*>(dst)[i] = F32ToBf16(value);
        break;
    }
  }
  return absl::OkStatus();
}

}  // namespace llama
