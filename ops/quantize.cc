#include "ops/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "ops/cast.h"
#include "ops/dtype.h"

namespace llama {

float QuantizeBlock(const float* v, int8_t* q) {
  float amax = 0;
  for (int i = 0; i < kQ8BlockElements; ++i) amax = std::max(amax, std::fabs(v[i]));
  const float d = amax / 127;
  const float id = InverseScale(d);
  for (int i = 0; i < kQ8BlockElements; ++i) q[i] = static_cast<int8_t>(std::lround(v[i] * id));
  return d;
}

namespace {

absl::Status CheckFinite(const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) {
      return absl::InvalidArgumentError(
          absl::StrFormat("element %d is %g: NaN and infinity cannot be quantized", i, x[i]));
    }
  }
  return absl::OkStatus();
}

constexpr int kSubBlock = 32, kSubBlocks = kQ4KBlockElements / kSubBlock;

// A sub-block's fit: value ~ scale * q - min with q in 0..15, scale >= 0,
// min >= 0 (the format's), and its squared error.
struct Fit {
  float scale = 0, min = 0;
  double error = 0;
};

// The nearest level to v, halves up (inline: the fits below round each
// value ten times, and a 7B model has 6e9).
int Level(float v, float scale, float min) {
  if (!(scale > 0)) return 0;
  const float t = (v + min) / scale;
  return t <= 0 ? 0 : t >= 15 ? 15 : static_cast<int>(t + 0.5f);
}

// Candidate steps (hi - lo) / (15 + t); for each, the levels it gives and
// the least-squares scale and offset of those levels (the offset held at
// or below 0, the format's minimum being subtracted), scored by their
// residual (from the sums: no second pass).
Fit FitSubBlock(const float* v) {
  const float lo = std::min(0.0f, *std::min_element(v, v + kSubBlock)), hi = *std::max_element(v, v + kSubBlock);
  if (hi <= lo) return {0, -lo, 0};  // Constant at or below 0: the minimum alone.
  double sx = 0, sxx = 0;
  for (int i = 0; i < kSubBlock; ++i) sx += v[i], sxx += static_cast<double>(v[i]) * v[i];
  Fit best{0, 0, sxx};
  for (float t = -0.5f; t <= 1.51f; t += 0.25f) {
    const float step = (hi - lo) / (15 + t);
    double sq = 0, sqq = 0, sqx = 0;
    for (int i = 0; i < kSubBlock; ++i) {
      const int q = Level(v[i], step, -lo);
      sq += q, sqq += q * q, sqx += q * v[i];
    }
    const double n = kSubBlock, det = n * sqq - sq * sq;
    double scale = det > 0 ? (n * sqx - sq * sx) / det : step, offset = det > 0 ? (sx - scale * sq) / n : lo;
    if (offset > 0) {  // The minimum cannot be negative: fit the scale alone.
      offset = 0;
      scale = sqq > 0 ? sqx / sqq : 0;
    }
    if (scale <= 0) continue;
    // sum (x - scale q - offset)^2, expanded.
    const double error = sxx - 2 * scale * sqx - 2 * offset * sx + scale * scale * sqq + 2 * scale * offset * sq +
                         n * offset * offset;
    if (error < best.error) best = {static_cast<float>(scale), static_cast<float>(-offset), error};
  }
  return best;
}

void QuantizeQ4KSuperBlock(const float* v, uint8_t* block) {
  Fit fits[kSubBlocks];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < kSubBlocks; ++j) {
    fits[j] = FitSubBlock(v + j * kSubBlock);
    max_scale = std::max(max_scale, fits[j].scale);
    max_min = std::max(max_min, fits[j].min);
  }
  const uint16_t d16 = F32ToF16(max_scale / 63), dmin16 = F32ToF16(max_min / 63);
  const float d = F16ToF32(d16), dmin = F16ToF32(dmin16);
  uint8_t scales[kSubBlocks], mins[kSubBlocks];
  for (int j = 0; j < kSubBlocks; ++j) {
    scales[j] = d > 0 ? static_cast<uint8_t>(std::clamp<long>(std::lround(fits[j].scale / d), 0, 63)) : 0;
    mins[j] = dmin > 0 ? static_cast<uint8_t>(std::clamp<long>(std::lround(fits[j].min / dmin), 0, 63)) : 0;
  }
  std::memcpy(block, &d16, 2);
  std::memcpy(block + 2, &dmin16, 2);
  // The 12 scale bytes: sub-blocks 0-3 in the low six bits of bytes 0-3
  // (scales) and 4-7 (minimums); 4-7 split into low four bits in bytes 8-11
  // and top two bits over bytes 0-7 (ggml_blocks.h's GgmlKScalesAndMins).
  for (int j = 0; j < 4; ++j) {
    block[4 + j] = scales[j] | (scales[j + 4] >> 4) << 6;
    block[8 + j] = mins[j] | (mins[j + 4] >> 4) << 6;
    block[12 + j] = (scales[j + 4] & 0xF) | (mins[j + 4] & 0xF) << 4;
  }
  // 32 nibble bytes per pair of sub-blocks: 2c in the low nibbles, 2c + 1 in the high.
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < kSubBlock; ++l) {
      uint8_t levels[2];
      for (int k = 0; k < 2; ++k) {
        const int j = 2 * c + k;
        levels[k] = static_cast<uint8_t>(Level(v[j * kSubBlock + l], d * scales[j], dmin * mins[j]));
      }
      block[16 + 32 * c + l] = levels[0] | levels[1] << 4;
    }
  }
}

// Q6_K: value = d * scale * q with q in -32..31 (stored q + 32), an int8
// scale per 16 values, f16 d. The nearest level, halves away from zero.
constexpr int kQ6KSubBlock = 16, kQ6KSubBlocks = kQ6KBlockElements / kQ6KSubBlock;

int SignedLevel(float v, float step) {
  if (!(step > 0)) return 0;
  return static_cast<int>(std::clamp<long>(std::lround(v / step), -32, 31));
}

// A sub-block's scale (>= 0): for candidate steps |extreme| / (levels + t),
// where the extreme value reaches level -32 or 31 at t = 0, the levels it
// gives and their least-squares scale, scored by the residual; the best.
float FitSymmetric(const float* v) {
  const float* extreme = std::max_element(v, v + kQ6KSubBlock, [](float a, float b) { return std::fabs(a) < std::fabs(b); });
  const float amax = std::fabs(*extreme);
  if (amax == 0) return 0;
  const float levels = *extreme < 0 ? 32 : 31;
  float best_scale = amax / levels;
  double best_error = -1;
  for (float t = -1.0f; t <= 2.01f; t += 0.25f) {
    const float step = amax / (levels + t);
    double sqq = 0, sqx = 0, sxx = 0;
    for (int i = 0; i < kQ6KSubBlock; ++i) {
      const int q = SignedLevel(v[i], step);
      sqq += q * q, sqx += q * v[i], sxx += static_cast<double>(v[i]) * v[i];
    }
    if (!(sqq > 0) || sqx <= 0) continue;
    const double scale = sqx / sqq, error = sxx - scale * sqx;  // sum (x - scale q)^2 at the fitted scale.
    if (best_error < 0 || error < best_error) best_scale = static_cast<float>(scale), best_error = error;
  }
  return best_scale;
}

void QuantizeQ6KSuperBlock(const float* v, uint8_t* block) {
  float scales[kQ6KSubBlocks], max_scale = 0;
  for (int j = 0; j < kQ6KSubBlocks; ++j) {
    scales[j] = FitSymmetric(v + j * kQ6KSubBlock);
    max_scale = std::max(max_scale, scales[j]);
  }
  const uint16_t d16 = F32ToF16(max_scale / 127);
  const float d = F16ToF32(d16);
  int8_t* sc = reinterpret_cast<int8_t*>(block + 192);
  int q[kQ6KBlockElements];
  for (int j = 0; j < kQ6KSubBlocks; ++j) {
    sc[j] = d > 0 ? static_cast<int8_t>(std::clamp<long>(std::lround(scales[j] / d), 0, 127)) : 0;
    for (int i = 0; i < kQ6KSubBlock; ++i) q[j * kQ6KSubBlock + i] = SignedLevel(v[j * kQ6KSubBlock + i], d * sc[j]) + 32;
  }
  // Each half of 128 values: value l + 32 k (k = 0..3) in the low (k < 2)
  // or high nibble of byte l + 32 (k % 2) of the half's 64 low bytes, its
  // top two bits at bit 2 k of byte l of its 32 high bytes.
  std::memset(block, 0, 192);
  for (int half = 0; half < 2; ++half) {
    uint8_t* ql = block + 64 * half;
    uint8_t* qh = block + 128 + 32 * half;
    for (int l = 0; l < 32; ++l) {
      for (int k = 0; k < 4; ++k) {
        const int value = q[128 * half + 32 * k + l];
        ql[l + 32 * (k % 2)] |= static_cast<uint8_t>((value & 0xF) << (4 * (k / 2)));
        qh[l] |= static_cast<uint8_t>((value >> 4) << (2 * k));
      }
    }
  }
  std::memcpy(block + 208, &d16, 2);
}

}  // namespace

absl::Status QuantizeQ4_K(const float* x, int64_t n, uint8_t* out) {
  RETURN_IF_ERROR(CheckFinite(x, n));
  for (int64_t b = 0; b < n / kQ4KBlockElements; ++b) {
    QuantizeQ4KSuperBlock(x + b * kQ4KBlockElements, out + b * kQ4KBlockBytes);
  }
  return absl::OkStatus();
}

absl::Status QuantizeQ6_K(const float* x, int64_t n, uint8_t* out) {
  RETURN_IF_ERROR(CheckFinite(x, n));
  for (int64_t b = 0; b < n / kQ6KBlockElements; ++b) {
    QuantizeQ6KSuperBlock(x + b * kQ6KBlockElements, out + b * kQ6KBlockBytes);
  }
  return absl::OkStatus();
}

absl::Status QuantizeQ8_0(const float* x, int64_t n, uint8_t* out) {
  RETURN_IF_ERROR(CheckFinite(x, n));
  for (int64_t b = 0; b < n / kQ8BlockElements; ++b) {
    const float* v = x + b * kQ8BlockElements;
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
