#include "ops/cpu/linear_q6k.h"

#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "ops/cast.h"
#include "ops/cpu/kernel_dispatch.h"
#include "ops/cpu/kquant_linear.h"
#include "ops/cpu/simd.h"
#include "ops/dtype.h"

namespace llama::cpu {
namespace {

using kquant::AddHalves;
using kquant::kLanes;
using kquant::Placement;
using kquant::QuantizedRow;
using kquant::RowDots;
using kquant::SumLanes;

// A super-block: 128 bytes ql, 64 bytes qh, 16 int8 scales, f16 d. Half h
// (values 128 h ...) takes ql[64 h ...], qh[32 h ...] and scales[8 h ...];
// its quarter c (values 128 h + 32 c + l, l < 32) has the low nibbles of
// ql[64 h + l] (c = 0) or ql[64 h + 32 + l] (c = 1), their high nibbles for
// c = 2 and 3, and bits 2c, 2c + 1 of qh[32 h + l] on top. Value i's scale
// is scales[i / 16].
constexpr int64_t kHighBitsOffset = 128, kScalesOffset = 192, kDOffset = 208;

// x in its own order, sums per 16 values (one per scale).
constexpr Placement kQ6KPlacement = {{0, 32, 64, 96, 128, 160, 192, 224}, 16};

// The lanes every variant computes per super-block b, for a row of x: lane
// k sums, over the eight quarters, scale times the dot product of q with x
// over bytes 4k..4k+3 of the quarter (what vpmaddubsw then vpmaddwd leave
// in an int32 lane), less 32 * (scale_2k * sum_2k + scale_2k+1 * sum_2k+1)
// (x's sums per 16); then acc_k = fma(dx * d, lane_k, acc_k). The row's
// output is SumLanes(acc). (|lane| < 2^26: int32 is exact; the f32
// conversion rounds the same way in every variant.)
template <int kRows>
__attribute__((always_inline)) inline void RowDotsScalar(const QuantizedRow* x, const uint8_t* row, int64_t blocks,
                                                          int64_t /*ahead*/, float* y, int64_t stride) {
  float acc[kRows][kLanes] = {};
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* block = row + b * kQ6KBlockBytes;
    const int8_t* scales = reinterpret_cast<const int8_t*>(block + kScalesOffset);
    uint16_t bits;
    std::memcpy(&bits, block + kDOffset, sizeof bits);
    const float d = F16ToF32(bits);
    for (int r = 0; r < kRows; ++r) {
      const int8_t* q = x[r].q + b * kQ6KBlockElements;
      const int16_t* sums = x[r].sums + b * 16;
      int32_t lanes[kLanes];
      for (int k = 0; k < kLanes; ++k) lanes[k] = -32 * (scales[2 * k] * sums[2 * k] + scales[2 * k + 1] * sums[2 * k + 1]);
      for (int i = 0; i < kQ6KBlockElements; ++i) {
        const int h = i / 128, c = i / 32 % 4, l = i % 32;
        const uint8_t low = block[64 * h + 32 * (c % 2) + l];
        const int value = (c < 2 ? low & 0xF : low >> 4) | ((block[kHighBitsOffset + 32 * h + l] >> (2 * c)) & 3) << 4;
        lanes[l / 4] += scales[i / 16] * (value * q[i]);
      }
      for (int k = 0; k < kLanes; ++k) acc[r][k] = std::fma(x[r].d[b] * d, static_cast<float>(lanes[k]), acc[r][k]);
    }
  }
  for (int r = 0; r < kRows; ++r) y[r * stride] = SumLanes(acc[r]);
}

// The offsets' part of each row's lanes (see RowDotsScalar): -32 times the
// scales (int16) times x's sums per 16, paired into eight int32.
__attribute__((target("avx2,fma,f16c"), always_inline)) inline __m256i Offsets(const QuantizedRow& x, int64_t b,
                                                                                __m256i scales) {
  const __m256i sums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.sums + b * 16));
  return _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(scales, sums), 5));
}

// AVX2: per half, the four quarters' 6-bit values rebuilt from ql and qh;
// vpmaddubsw multiplies them (unsigned) by x (pairs fit in int16: 2 * 63 *
// 127), vpmaddwd by the scales (the low 16 bytes of a quarter take one
// scale, the high 16 the next) into int32 lanes, vpaddd accumulates.
template <int kRows>
__attribute__((target("avx2,fma,f16c"), always_inline)) inline void
RowDotsAvx2(const QuantizedRow* x, const uint8_t* row, int64_t blocks, int64_t ahead, float* y,
            int64_t stride) {
  const __m256i low_nibble = _mm256_set1_epi8(0xF), high_pair = _mm256_set1_epi8(0x30);
  // vpshufb picking int16 0 of each dword into the low 16 bytes, int16 1
  // into the high 16.
  const __m256i split = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3,
                                         2, 3, 2, 3, 2, 3);
  __m256 acc[kRows];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* block = row + b * kQ6KBlockBytes;
    if (ahead != 0) simd::PrefetchAhead(block, ahead, kQ6KBlockBytes);
    const __m256i scales =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + kScalesOffset)));
    __m256i dot[kRows];
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) dot[r] = Offsets(x[r], b, scales);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 64 * h));
      const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 64 * h + 32));
      const __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + kHighBitsOffset + 32 * h));
      const __m256i values[4] = {
          _mm256_or_si256(_mm256_and_si256(a, low_nibble), _mm256_and_si256(_mm256_slli_epi16(high, 4), high_pair)),
          _mm256_or_si256(_mm256_and_si256(c, low_nibble), _mm256_and_si256(_mm256_slli_epi16(high, 2), high_pair)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), low_nibble), _mm256_and_si256(high, high_pair)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(c, 4), low_nibble),
                          _mm256_and_si256(_mm256_srli_epi16(high, 2), high_pair)),
      };
#pragma GCC unroll 4
      for (int quarter = 0; quarter < 4; ++quarter) {
        const __m256i scale = _mm256_shuffle_epi8(
            _mm256_permutevar8x32_epi32(scales, _mm256_set1_epi32(4 * h + quarter)), split);
#pragma GCC unroll 8
        for (int r = 0; r < kRows; ++r) {
          const __m256i xq = _mm256_loadu_si256(
              reinterpret_cast<const __m256i*>(x[r].q + b * kQ6KBlockElements + 128 * h + 32 * quarter));
          dot[r] = _mm256_add_epi32(dot[r], _mm256_madd_epi16(_mm256_maddubs_epi16(values[quarter], xq), scale));
        }
      }
    }
    const float d = kquant::F16At(block + kDOffset);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(x[r].d[b] * d), _mm256_cvtepi32_ps(dot[r]), acc[r]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) y[r * stride] = SumLanes(acc[r]);
}

// vpermw indices giving each 16-byte lane of a 64-byte register the int16
// scale first + lane (of 16 scales in the low 32 bytes).
__attribute__((target("avx512f,avx512bw"), always_inline)) inline __m512i ScaleIndex(int first) {
  return _mm512_add_epi16(_mm512_set1_epi16(static_cast<int16_t>(first)),
                          _mm512_srli_epi16(_mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17,
                                                             16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                            3));
}

// AVX-512: quarters 0 and 1 of a half in one register (ql's 64 bytes as
// they are, qh's bits shifted per 32-byte half by vpsllvw), 2 and 3 in
// another; vpdpwssd (VNNI) takes the scales' multiply and the add in one;
// the two halves of the int32 lanes added are AVX2's lanes exactly.
template <int kRows>
__attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"), always_inline)) inline void
RowDotsAvx512Vnni(const QuantizedRow* x, const uint8_t* row, int64_t blocks, int64_t ahead, float* y,
                  int64_t stride) {
  const __m512i low_nibble = _mm512_set1_epi8(0xF), high_pair = _mm512_set1_epi8(0x30);
  // qh's bits 0-1 (quarter 0) and 2-3 (quarter 1) to bits 4-5; 4-5 and 6-7
  // for quarters 2 and 3.
  const __m512i low_shift = _mm512_mask_blend_epi64(0xF0, _mm512_set1_epi16(4), _mm512_set1_epi16(2));
  const __m512i high_shift = _mm512_mask_blend_epi64(0xF0, _mm512_setzero_si512(), _mm512_set1_epi16(2));
  const __m512i index[2][2] = {{ScaleIndex(0), ScaleIndex(4)}, {ScaleIndex(8), ScaleIndex(12)}};
  __m256 acc[kRows];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* block = row + b * kQ6KBlockBytes;
    if (ahead != 0) simd::PrefetchAhead(block, ahead, kQ6KBlockBytes);
    const __m128i scale_bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + kScalesOffset));
    const __m512i scales = _mm512_cvtepi8_epi16(_mm256_broadcastsi128_si256(scale_bytes));
    __m512i dot[kRows];
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) dot[r] = _mm512_setzero_si512();
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = _mm512_loadu_si512(block + 64 * h);
      // qh's 32 bytes in both halves (a masked load: a 64-byte one from half
      // 1's would run 14 bytes past the block, and past the tensor's end).
      const __m512i qh32 = _mm512_maskz_loadu_epi64(0x0F, block + kHighBitsOffset + 32 * h);
      const __m512i qh = _mm512_maskz_shuffle_i64x2(0xFF, qh32, qh32, 0x44);
      const __m512i low = _mm512_or_si512(_mm512_and_si512(ql, low_nibble),
                                          _mm512_and_si512(_mm512_sllv_epi16(qh, low_shift), high_pair));
      const __m512i high = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low_nibble),
                                           _mm512_and_si512(_mm512_srlv_epi16(qh, high_shift), high_pair));
      const __m512i low_scale = _mm512_permutexvar_epi16(index[h][0], scales);
      const __m512i high_scale = _mm512_permutexvar_epi16(index[h][1], scales);
#pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) {
        const int8_t* q = x[r].q + b * kQ6KBlockElements + 128 * h;
        dot[r] = _mm512_dpwssd_epi32(dot[r], _mm512_maddubs_epi16(low, _mm512_loadu_si512(q)), low_scale);
        dot[r] = _mm512_dpwssd_epi32(dot[r], _mm512_maddubs_epi16(high, _mm512_loadu_si512(q + 64)), high_scale);
      }
    }
    const __m256i scales16 = _mm256_cvtepi8_epi16(scale_bytes);
    const float d = kquant::F16At(block + kDOffset);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      const __m256i lanes = _mm256_add_epi32(Offsets(x[r], b, scales16), AddHalves(dot[r]));
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(x[r].d[b] * d), _mm256_cvtepi32_ps(lanes), acc[r]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) y[r * stride] = SumLanes(acc[r]);
}

LLAMA_KQUANT_ROWS(LLAMA_KQUANT_AVX512, RowDotsAvx512Vnni, 8)
LLAMA_KQUANT_KERNELS()

}  // namespace

std::string_view Q6KKernel() { return ChosenKernels().name(); }

bool ForceQ6KKernelForTesting(std::string_view name) { return ChosenKernels().ForceForTesting(name); }

kquant::Target Q6KTarget(const Tensor& w, float* y) { return {&w, &kQ6KPlacement, &ChosenKernels().kernel(), y}; }

}  // namespace llama::cpu
