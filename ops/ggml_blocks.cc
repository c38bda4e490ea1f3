#include "ops/ggml_blocks.h"

#include <cstring>

#include "absl/strings/str_format.h"
#include "ops/cast.h"

namespace llama {
namespace {

// ggml.c's type_traits: elements and bytes per block.
constexpr GgmlTypeTraits kGgmlTypes[] = {
    {GgmlType::kF32, "F32", 1, 4},       {GgmlType::kF16, "F16", 1, 2},       {GgmlType::kQ4_0, "Q4_0", 32, 18},
    {GgmlType::kQ4_1, "Q4_1", 32, 20},   {GgmlType::kQ5_0, "Q5_0", 32, 22},   {GgmlType::kQ5_1, "Q5_1", 32, 24},
    {GgmlType::kQ8_0, "Q8_0", 32, 34},   {GgmlType::kQ8_1, "Q8_1", 32, 36},   {GgmlType::kQ2_K, "Q2_K", 256, 84},
    {GgmlType::kQ3_K, "Q3_K", 256, 110}, {GgmlType::kQ4_K, "Q4_K", 256, 144}, {GgmlType::kQ5_K, "Q5_K", 256, 176},
    {GgmlType::kQ6_K, "Q6_K", 256, 210}, {GgmlType::kQ8_K, "Q8_K", 256, 292}, {GgmlType::kI8, "I8", 1, 1},
    {GgmlType::kI16, "I16", 1, 2},       {GgmlType::kI32, "I32", 1, 4},       {GgmlType::kI64, "I64", 1, 8},
    {GgmlType::kF64, "F64", 1, 8},       {GgmlType::kBF16, "BF16", 1, 2},
};

constexpr int kSuperBlock = 256;  // QK_K: the K-quants' block.

float HalfAt(const uint8_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, sizeof bits);
  return F16ToF32(bits);
}

// Q4_0 (18 bytes): f16 scale, then 16 bytes whose low nibbles are values
// 0-15 and high nibbles values 16-31, each stored plus 8.
void DecodeQ4_0(const uint8_t* block, float* out) {
  const float d = HalfAt(block);
  const uint8_t* qs = block + 2;
  for (int j = 0; j < 16; ++j) {
    out[j] = static_cast<float>((qs[j] & 0x0F) - 8) * d;
    out[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
  }
}

// Q8_0 (34 bytes): f16 scale, 32 int8 values.
void DecodeQ8_0(const uint8_t* block, float* out) {
  const float d = HalfAt(block);
  const int8_t* qs = reinterpret_cast<const int8_t*>(block + 2);
  for (int j = 0; j < 32; ++j) out[j] = static_cast<float>(qs[j]) * d;
}

// Q4_K (144 bytes) and Q5_K (176): f16 super-scale d and super-minimum
// dmin, 12 bytes of sub-block scales and minimums, for Q5_K 32 bytes of
// fifth bits, then 128 bytes of nibbles. Each 64 values share 32 nibble
// bytes (low nibbles first, high nibbles second) and two sub-blocks; value
// = d * scale * q - dmin * min. A template on the fifth bit, so that Q4_K's
// loops (the prefill of q4_k weights decodes every row) have no test in them.
template <bool fifth_bit>
void DecodeQ4_KOrQ5_K(const uint8_t* block, float* out) {
  const float d = HalfAt(block);
  const float dmin = HalfAt(block + 2);
  const uint8_t* scales = block + 4;
  const uint8_t* high = block + 16;
  const uint8_t* q = block + (fifth_bit ? 48 : 16);
  uint8_t low_bit = 1, high_bit = 2;  // Q5_K: the fifth bits of the two halves, 2 bits on per 64 values.
  uint8_t scale[8], min[8];
  GgmlKScalesAndMins(scales, scale, min);
  for (int j = 0, sub = 0; j < kSuperBlock; j += 64, sub += 2) {
    const float d1 = d * scale[sub], m1 = dmin * min[sub];
    const float d2 = d * scale[sub + 1], m2 = dmin * min[sub + 1];
    for (int l = 0; l < 32; ++l) {
      const int fifth = fifth_bit && (high[l] & low_bit) ? 16 : 0;
      *out++ = d1 * static_cast<float>((q[l] & 0xF) + fifth) - m1;
    }
    for (int l = 0; l < 32; ++l) {
      const int fifth = fifth_bit && (high[l] & high_bit) ? 16 : 0;
      *out++ = d2 * static_cast<float>((q[l] >> 4) + fifth) - m2;
    }
    q += 32;
    low_bit <<= 2;
    high_bit <<= 2;
  }
}

// Q6_K (210 bytes): 128 bytes of low nibbles, 64 bytes of 2-bit highs, 16
// int8 scales (one per 16 values), f16 d last; value = d * scale * (q - 32).
// Each half of 128 values takes 64 low bytes and 32 high bytes, four values
// per high byte, 32 apart.
void DecodeQ6_K(const uint8_t* block, float* out) {
  const uint8_t* ql = block;
  const uint8_t* qh = block + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(block + 192);
  const float d = HalfAt(block + 208);
  for (int half = 0; half < 2; ++half) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      out[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
      out[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
      out[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
      out[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
    }
    out += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

}  // namespace

const GgmlTypeTraits* GgmlTraitsOf(uint32_t type) {
  for (const GgmlTypeTraits& traits : kGgmlTypes) {
    if (static_cast<uint32_t>(traits.type) == type) return &traits;
  }
  return nullptr;
}

std::string GgmlTypeName(uint32_t type) {
  const GgmlTypeTraits* traits = GgmlTraitsOf(type);
  return traits != nullptr ? traits->name : absl::StrFormat("type %d", type);
}

bool IsDecodableGgmlBlockType(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kQ4_0:
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ6_K:
      return true;
    default:
      return false;
  }
}

int64_t GgmlRowBytes(const GgmlTypeTraits& traits, int64_t elements) {
  return elements / traits.block_elements * traits.block_bytes;
}

absl::Status DecodeGgmlRow(uint32_t type, const uint8_t* blocks, int64_t elements, float* out) {
  const GgmlTypeTraits* traits = GgmlTraitsOf(type);
  if (traits == nullptr || !IsDecodableGgmlBlockType(type)) {
    return absl::UnimplementedError(absl::StrFormat(
        "ggml type %s is not read here (expected Q4_0, Q8_0, Q4_K, Q5_K or Q6_K among the block types)",
        GgmlTypeName(type)));
  }
  if (elements % traits->block_elements != 0) {
    return absl::InvalidArgumentError(absl::StrFormat("a row of %d values is not whole %s blocks of %d", elements,
                                                      traits->name, traits->block_elements));
  }
  for (int64_t at = 0; at < elements; at += traits->block_elements, blocks += traits->block_bytes) {
    switch (traits->type) {
      case GgmlType::kQ4_0:
        DecodeQ4_0(blocks, out + at);
        break;
      case GgmlType::kQ8_0:
        DecodeQ8_0(blocks, out + at);
        break;
      case GgmlType::kQ4_K:
        DecodeQ4_KOrQ5_K</*fifth_bit=*/false>(blocks, out + at);
        break;
      case GgmlType::kQ5_K:
        DecodeQ4_KOrQ5_K</*fifth_bit=*/true>(blocks, out + at);
        break;
      default:  // Q6_K: the last decodable type.
        DecodeQ6_K(blocks, out + at);
        break;
    }
  }
  return absl::OkStatus();
}

}  // namespace llama
