#include "ops/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_format.h"
#include "ops/cast.h"
#include "ops/dtype.h"

namespace llama {

float QuantizeBlock(const float* v, int8_t* q) {
  float amax = 0;
  for (int i = 0; i < kQ8BlockElements; ++i) amax = std::max(amax, std::fabs(v[i]));
  const float d = amax / 127;
  const float id = d != 0 ? 1 / d : 0;
  for (int i = 0; i < kQ8BlockElements; ++i) q[i] = static_cast<int8_t>(std::lround(v[i] * id));
  return d;
}

absl::Status QuantizeQ8_0(const float* x, int64_t n, uint8_t* out) {
  for (int64_t b = 0; b < n / kQ8BlockElements; ++b) {
    const float* v = x + b * kQ8BlockElements;
    for (int i = 0; i < kQ8BlockElements; ++i) {
      if (!std::isfinite(v[i])) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "element %d is %g: NaN and infinity cannot be quantized", b * kQ8BlockElements + i, v[i]));
      }
    }
    uint8_t* block = out + b * kQ8BlockBytes;
    const uint16_t d16 = F32ToF16(QuantizeBlock(v, reinterpret_cast<int8_t*>(block + 2)));
    std::memcpy(block, &d16, 2);
  }
  return absl::OkStatus();
}

void DequantizeQ8_0(const uint8_t* blocks, int64_t n, float* out) {
  for (int64_t b = 0; b < n / kQ8BlockElements; ++b) {
    const uint8_t* block = blocks + b * kQ8BlockBytes;
    uint16_t d16;
    std::memcpy(&d16, block, 2);
    const float d = F16ToF32(d16);
    for (int i = 0; i < kQ8BlockElements; ++i) {
      out[b * kQ8BlockElements + i] = d * static_cast<int8_t>(block[2 + i]);
    }
  }
}

}  // namespace llama
