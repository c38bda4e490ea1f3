#include "ops/cpu/linear_q4k.h"

#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "ops/cast.h"
#include "ops/cpu/cache_aligned.h"
#include "ops/cpu/kernel_dispatch.h"
#include "ops/cpu/kquant_linear.h"
#include "ops/cpu/simd.h"
#include "ops/dtype.h"
#include "ops/ggml_blocks.h"

namespace llama::cpu {
namespace {

using kquant::AddHalves;
using kquant::kLanes;
using kquant::Placement;
using kquant::QuantizedRow;
using kquant::RowDots;
using kquant::SumLanes;

// A super-block: f16 d, f16 dmin, 12 scale bytes, then 128 bytes of
// nibbles; each 32 nibble bytes hold 64 values, the low nibbles the first
// 32 (sub-block 2j), the high nibbles the next 32 (sub-block 2j + 1).
constexpr int kSubBlocks = 8;
constexpr int64_t kScalesOffset = 4, kNibblesOffset = 16;

// x's int8 values are stored per super-block in the order the weights'
// nibbles meet them two 32-byte chunks at a time: for chunks 2p and 2p + 1
// (sub-blocks 4p, 4p + 1, 4p + 2, 4p + 3), the low nibbles' x of both, then
// the high nibbles' x of both. So one 64-byte load of x matches one 64-byte
// load of nibbles (the AVX-512 kernel) and the 32-byte kernels read x at
// the offsets below.
constexpr int64_t LowX(int j) { return 128 * (j / 2) + 32 * (j % 2); }
constexpr int64_t HighX(int j) { return LowX(j) + 64; }
constexpr Placement kQ4KPlacement = {{LowX(0), HighX(0), LowX(1), HighX(1), LowX(2), HighX(2), LowX(3), HighX(3)}, 32};

// Every kernel computes, for each row of x and one weight row, the same
// f32 operations, so all give the same bits. Per super-block b, eight
// exact int32 lanes: lane k sums, over the four chunks and both nibbles,
// scale times the dot product of bytes 4k..4k+3 of the chunk's nibbles
// with their x (what vpmaddubsw then vpmaddwd leave in an int32 lane);
// and eight more, min_s times x's sum over sub-block s. Eight f32
// accumulators take them in order, acc_k = fma(dx * d, lane_k, acc_k) then
// fma(-(dx * dmin), mins_k, acc_k); the row's output is their sum in
// SumLanes' order. The integers fit f32 exactly (|lane| < 2^22).
struct BlockFactors {
  float d, dmin;
  uint8_t scales[kSubBlocks], mins[kSubBlocks];
};

template <int kRows>
__attribute__((always_inline)) inline void RowDotsScalar(const QuantizedRow* x, const uint8_t* row, int64_t blocks,
                                                          int64_t /*ahead*/, float* y, int64_t stride) {
  float acc[kRows][kLanes] = {};
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* block = row + b * kQ4KBlockBytes;
    const uint8_t* nibbles = block + kNibblesOffset;
    BlockFactors f;
    GgmlKScalesAndMins(block + kScalesOffset, f.scales, f.mins);
    uint16_t bits[2];
    std::memcpy(bits, block, sizeof bits);
    f.d = F16ToF32(bits[0]);
    f.dmin = F16ToF32(bits[1]);
    for (int r = 0; r < kRows; ++r) {
      const int8_t* q = x[r].q + b * kQ4KBlockElements;
      int32_t lanes[kLanes] = {};
      for (int j = 0; j < 4; ++j) {
        for (int l = 0; l < 32; ++l) {
          lanes[l / 4] += f.scales[2 * j] * ((nibbles[32 * j + l] & 0xF) * q[LowX(j) + l]) +
                          f.scales[2 * j + 1] * ((nibbles[32 * j + l] >> 4) * q[HighX(j) + l]);
        }
      }
      const float dd = x[r].d[b] * f.d, dm = -(x[r].d[b] * f.dmin);
      for (int k = 0; k < kLanes; ++k) {
        acc[r][k] = std::fma(dd, static_cast<float>(lanes[k]), acc[r][k]);
        const int32_t mins = f.mins[k] * x[r].sums[b * kSubBlocks + k];
        acc[r][k] = std::fma(dm, static_cast<float>(mins), acc[r][k]);
      }
    }
  }
  for (int r = 0; r < kRows; ++r) y[r * stride] = SumLanes(acc[r]);
}

// The vector kernels' shared steps, on 32-byte registers. d and dmin: F16C,
// exact as F16ToF32. Scales as int16, the eight repeated in both halves,
// for vpshufb to broadcast one; the minimums as int32.
struct VectorFactors {
  float d, dmin;
  __m256i scales, mins;
  int64_t scale_bytes;  // The eight scales as they are.
};

// GgmlKScalesAndMins in one register: the eight scales in bytes 0-7, the
// minimums in 8-15, from the 12 packed bytes (16 read: the nibbles follow).
// Sub-blocks 0-3 are the low six bits of bytes 0-3 and 4-7; 4-7 the low and
// high nibbles of bytes 8-11 under the top two bits of bytes 0-3 and 4-7.
__attribute__((target("avx2"), always_inline)) inline __m128i UnpackScales(const uint8_t* packed) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(packed));
  const __m128i low = _mm_shuffle_epi8(v, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
  const __m128i top = _mm_shuffle_epi8(v, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
  const __m128i bits = _mm_and_si128(_mm_srlv_epi32(low, _mm_setr_epi32(0, 0, 0, 4)),
                                     _mm_setr_epi32(0x3F3F3F3F, 0x0F0F0F0F, 0x3F3F3F3F, 0x0F0F0F0F));
  return _mm_or_si128(bits, _mm_and_si128(_mm_srli_epi32(top, 2), _mm_set1_epi8(0x30)));
}

__attribute__((target("avx2,fma,f16c"), always_inline)) inline VectorFactors FactorsOf(const uint8_t* block) {
  const __m128i packed = UnpackScales(block + kScalesOffset);
  int32_t bits;
  std::memcpy(&bits, block, sizeof bits);
  const __m128 d = _mm_cvtph_ps(_mm_cvtsi32_si128(bits));
  return {_mm_cvtss_f32(d), _mm_cvtss_f32(_mm_shuffle_ps(d, d, 1)),
          _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(packed)), _mm256_cvtepu8_epi32(_mm_srli_si128(packed, 8)),
          _mm_cvtsi128_si64(packed)};
}

// vpshufb indices broadcasting int16 scale s of VectorFactors::scales.
__attribute__((target("avx2"), always_inline)) inline __m256i ScaleIndex(int s) {
  return _mm256_set1_epi16(static_cast<int16_t>((2 * s + 1) << 8 | 2 * s));
}

// acc (one row's eight lanes) takes super-block b's integer lanes.
__attribute__((target("avx2,fma,f16c"), always_inline)) inline __m256 Accumulate(
    const QuantizedRow& x, int64_t b, const VectorFactors& f, __m256i dot, __m256 acc) {
  const __m256i sums = _mm256_cvtepi16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x.sums + b * kSubBlocks)));
  const __m256i mins = _mm256_madd_epi16(f.mins, sums);  // The int16 above each min is 0.
  acc = _mm256_fmadd_ps(_mm256_set1_ps(x.d[b] * f.d), _mm256_cvtepi32_ps(dot), acc);
  return _mm256_fmadd_ps(_mm256_set1_ps(-(x.d[b] * f.dmin)), _mm256_cvtepi32_ps(mins), acc);
}

// AVX2: vpmaddubsw multiplies the unsigned nibbles by signed x (pairs fit
// in int16: 2 * 15 * 127), vpmaddwd by the sub-block's scale (<= 63) into
// int32 lanes, vpaddd accumulates.
template <int kRows>
__attribute__((target("avx2,fma,f16c"), always_inline)) inline void
RowDotsAvx2(const QuantizedRow* x, const uint8_t* row, int64_t blocks, int64_t ahead, float* y,
            int64_t stride) {
  const __m256i low_nibble = _mm256_set1_epi8(0xF);
  __m256 acc[kRows];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* block = row + b * kQ4KBlockBytes;
    if (ahead != 0) simd::PrefetchAhead(block, ahead, kQ4KBlockBytes);
    const VectorFactors f = FactorsOf(block);
    __m256i dot[kRows];
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) dot[r] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + kNibblesOffset + 32 * j));
      const __m256i low = _mm256_and_si256(v, low_nibble), high = _mm256_and_si256(_mm256_srli_epi16(v, 4), low_nibble);
      const __m256i low_scale = _mm256_shuffle_epi8(f.scales, ScaleIndex(2 * j));
      const __m256i high_scale = _mm256_shuffle_epi8(f.scales, ScaleIndex(2 * j + 1));
#pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) {
        const int8_t* q = x[r].q + b * kQ4KBlockElements;
        const __m256i xl = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + LowX(j)));
        const __m256i xh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + HighX(j)));
        dot[r] = _mm256_add_epi32(dot[r], _mm256_madd_epi16(_mm256_maddubs_epi16(low, xl), low_scale));
        dot[r] = _mm256_add_epi32(dot[r], _mm256_madd_epi16(_mm256_maddubs_epi16(high, xh), high_scale));
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) acc[r] = Accumulate(x[r], b, f, dot[r], acc[r]);
  }
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) y[r * stride] = SumLanes(acc[r]);
}

// ScaleIndex(low) for the low 32 bytes, ScaleIndex(high) for the high.
// (Blends, not casts and inserts: GCC 12 warns on those intrinsics' undefined
// upper halves.)
__attribute__((target("avx512f,avx512bw"), always_inline)) inline __m512i ScaleIndexPair(int low, int high) {
  return _mm512_mask_blend_epi64(0xF0, _mm512_set1_epi16(static_cast<int16_t>((2 * low + 1) << 8 | 2 * low)),
                                 _mm512_set1_epi16(static_cast<int16_t>((2 * high + 1) << 8 | 2 * high)));
}

// Two rows' lanes in one 64-byte register: AddHalves(a) in the low half,
// AddHalves(b) in the high half, the same int32 values. The AVX-512
// kernel accumulates rows in pairs this way, so that each f32 step of the
// per-row arithmetic is one instruction for two rows (the same operation
// on every lane, so the same bits). (Masked forms of the intrinsics here
// and in the kernel: GCC 12 warns on the plain ones' undefined inputs.)
__attribute__((target("avx512f"), always_inline)) inline __m512i PairHalves(__m512i a, __m512i b) {
  return _mm512_add_epi32(_mm512_maskz_shuffle_i64x2(0xFF, a, b, 0x44), _mm512_maskz_shuffle_i64x2(0xFF, a, b, 0xEE));
}

// What the per-row f32 steps of rows 2i and 2i + 1 take from x at
// super-block b, as the paired accumulators hold them (row 2i's in the low
// eight lanes, 2i + 1's in the high): the scales d, and the sums of q over
// each sub-block as f32 (exact: |sum| <= 32 * 127, and times a minimum,
// <= 63, still an integer f32 holds exactly, so one vmulps gives the f32
// of the integer product Accumulate converts). The same for every weight
// row, so made once per call (RowDotsAvx512VnniRows), not once per weight
// row and super-block.
struct alignas(64) PairFactors {
  float d[16];
  float sums[16];
};

// Rows r and r + 1's outputs from their paired accumulators.
__attribute__((target("avx512f"), always_inline)) inline void StorePair(__m512 acc, float* y_low, float* y_high) {
  alignas(64) float lanes[2 * kLanes];
  _mm512_store_ps(lanes, acc);
  *y_low = SumLanes(lanes);
  *y_high = SumLanes(lanes + kLanes);
}

// One super-block's nibbles and scales as the AVX-512 kernel unpacks them:
// chunks 2p and 2p + 1 in [p].
struct Unpacked {
  const __m512i* low;
  const __m512i* high;
  const __m512i* low_scale;
  const __m512i* high_scale;
};

// A row of x's integer lanes over the super-block (q: its values there).
__attribute__((target("avx512f,avx512bw,avx512vnni"), always_inline)) inline __m512i Lanes(const Unpacked& w,
                                                                                              const int8_t* q) {
  __m512i lanes = _mm512_setzero_si512();
#pragma GCC unroll 2
  for (int p = 0; p < 2; ++p) {
    lanes = _mm512_dpwssd_epi32(lanes, _mm512_maddubs_epi16(w.low[p], _mm512_loadu_si512(q + 128 * p)), w.low_scale[p]);
    lanes = _mm512_dpwssd_epi32(lanes, _mm512_maddubs_epi16(w.high[p], _mm512_loadu_si512(q + 128 * p + 64)),
                                w.high_scale[p]);
  }
  return lanes;
}

// AVX-512: two chunks a register (x's stored order pairs them), vpdpwssd
// (VNNI) taking the scales' multiply and the add in one; the two 32-byte
// halves of the int32 lanes, added at the end of the super-block, are
// AVX2's lanes exactly. The super-block's nibbles and scales are unpacked
// once, then each pair of rows takes its products and its f32 steps in
// turn, so that few registers stay live whatever the number of rows.
// pairs: PairFactors for super-block b and pair i at [b * (kRows / 2) + i].
template <int kRows>
__attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"), always_inline)) inline void
RowDotsAvx512Vnni(const QuantizedRow* x, const PairFactors* pairs, const uint8_t* row, int64_t blocks,
                  int64_t ahead, float* y, int64_t stride) {
  const __m512i low_nibble = _mm512_set1_epi8(0xF);
  // Chunk 2p's scale in the low half, 2p + 1's in the high half.
  const __m512i low_index[2] = {ScaleIndexPair(0, 2), ScaleIndexPair(4, 6)};
  const __m512i high_index[2] = {ScaleIndexPair(1, 3), ScaleIndexPair(5, 7)};
  // Rows in pairs (PairHalves), an odd last row on its own.
  constexpr int kPairs = kRows / 2;
  __m512 pair_acc[kPairs > 0 ? kPairs : 1];
  __m256 last_acc = _mm256_setzero_ps();
#pragma GCC unroll 8
  for (int i = 0; i < kPairs; ++i) pair_acc[i] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* block = row + b * kQ4KBlockBytes;
    if (ahead != 0) simd::PrefetchAhead(block, ahead, kQ4KBlockBytes);
    const VectorFactors f = FactorsOf(block);
    const __m512i scales = _mm512_cvtepu8_epi16(_mm256_set1_epi64x(f.scale_bytes));
    __m512i low[2], high[2], low_scale[2], high_scale[2];
#pragma GCC unroll 2
    for (int p = 0; p < 2; ++p) {
      const __m512i v = _mm512_loadu_si512(block + kNibblesOffset + 64 * p);
      low[p] = _mm512_and_si512(v, low_nibble);
      high[p] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low_nibble);
      low_scale[p] = _mm512_shuffle_epi8(scales, low_index[p]);
      high_scale[p] = _mm512_shuffle_epi8(scales, high_index[p]);
    }
    const Unpacked w = {low, high, low_scale, high_scale};
    const int64_t offset = b * kQ4KBlockElements;
    if constexpr (kPairs > 0) {
      const __m512 mins = _mm512_maskz_cvtepi32_ps(0xFFFF, _mm512_maskz_broadcast_i64x4(0xFF, f.mins));
      // x.d[b] * d and -(x.d[b] * dmin) as Accumulate takes them: the
      // same products (a * -b is -(a * b) exactly).
      const __m512 d = _mm512_set1_ps(f.d), minus_dmin = _mm512_set1_ps(-f.dmin);
#pragma GCC unroll 8
      for (int i = 0; i < kPairs; ++i) {
        const PairFactors& p = pairs[b * kPairs + i];
        const __m512 scales = _mm512_load_ps(p.d);
        const __m512i lanes = PairHalves(Lanes(w, x[2 * i].q + offset), Lanes(w, x[2 * i + 1].q + offset));
        pair_acc[i] = _mm512_fmadd_ps(_mm512_mul_ps(scales, d), _mm512_maskz_cvtepi32_ps(0xFFFF, lanes), pair_acc[i]);
        pair_acc[i] = _mm512_fmadd_ps(_mm512_mul_ps(scales, minus_dmin), _mm512_mul_ps(mins, _mm512_load_ps(p.sums)),
                                      pair_acc[i]);
      }
    }
    if constexpr (kRows % 2 == 1) {
      last_acc = Accumulate(x[kRows - 1], b, f, AddHalves(Lanes(w, x[kRows - 1].q + offset)), last_acc);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < kPairs; ++i) StorePair(pair_acc[i], &y[2 * i * stride], &y[(2 * i + 1) * stride]);
  if constexpr (kRows % 2 == 1) y[(kRows - 1) * stride] = SumLanes(last_acc);
}

// The AVX-512 kernel over `count` weight rows, with x's PairFactors made
// once for all of them.
template <int kRows>
LLAMA_KQUANT_AVX512 void RowDotsAvx512VnniRows(const QuantizedRow* x, const uint8_t* rows, int64_t row_bytes,
                                              int64_t count, int64_t blocks, float* y, int64_t stride) {
  constexpr int kPairs = kRows / 2;
  thread_local CacheAlignedVector<PairFactors> pairs;
  pairs.resize(blocks * kPairs);
  for (int64_t b = 0; b < blocks; ++b) {
    for (int i = 0; i < kPairs; ++i) {
      PairFactors& p = pairs[b * kPairs + i];
      for (int half = 0; half < 2; ++half) {
        const QuantizedRow& xr = x[2 * i + half];
        for (int k = 0; k < kSubBlocks; ++k) {
          p.d[8 * half + k] = xr.d[b];
          p.sums[8 * half + k] = static_cast<float>(xr.sums[b * kSubBlocks + k]);
        }
      }
    }
  }
  const int64_t ahead = WeightPrefetchBytes();
  for (int64_t o = 0; o < count; ++o) {
    RowDotsAvx512Vnni<kRows>(x, pairs.data(), rows + o * row_bytes, blocks, ahead, y + o, stride);
  }
}

LLAMA_KQUANT_KERNELS()

}  // namespace

std::string_view Q4KKernel() { return ChosenKernels().name(); }

bool ForceQ4KKernelForTesting(std::string_view name) { return ChosenKernels().ForceForTesting(name); }

kquant::Target Q4KTarget(const Tensor& w, float* y) { return {&w, &kQ4KPlacement, &ChosenKernels().kernel(), y}; }

}  // namespace llama::cpu
