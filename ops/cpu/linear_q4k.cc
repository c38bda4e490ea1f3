#include "ops/cpu/linear_q4k.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ops/cast.h"
#include "ops/cpu/kernel_dispatch.h"
#include "ops/cpu/panels.h"
#include "ops/dtype.h"
#include "ops/ggml_blocks.h"

namespace llama::cpu {
namespace {

// A super-block: f16 d, f16 dmin, 12 scale bytes, then 128 bytes of
// nibbles; each 32 nibble bytes hold 64 values, the low nibbles the first
// 32 (sub-block 2j), the high nibbles the next 32 (sub-block 2j + 1).
constexpr int kSubBlocks = 8;
constexpr int64_t kScalesOffset = 4, kNibblesOffset = 16;

// Rows of x, each quantized per super-block (QuantizeSuperBlock).
struct QuantizedRow {
  const int8_t* q;
  const float* d;        // [blocks]
  const int16_t* sums;   // [blocks][8]: each sub-block's sum of q.
};

// One super-block of x: d = max|v| / 127 (kept in f32), q = round(v / d),
// as QuantizeBlock does per 32; and the sum of each sub-block's q, which
// the weights' minimums multiply.
float QuantizeSuperBlock(const float* v, int8_t* q, int16_t* sums) {
  float amax = 0;
  for (int i = 0; i < kQ4KBlockElements; ++i) amax = std::max(amax, std::fabs(v[i]));
  const float d = amax / 127, id = d != 0 ? 1 / d : 0;
  for (int s = 0; s < kSubBlocks; ++s) {
    int sum = 0;
    for (int l = 0; l < 32; ++l) {
      q[32 * s + l] = static_cast<int8_t>(std::lround(v[32 * s + l] * id));
      sum += q[32 * s + l];
    }
    sums[s] = static_cast<int16_t>(sum);
  }
  return d;
}

// What a kernel gives per super-block b of one weight row: d and dmin as
// f32 (exact conversions of the f16s), and for each row r of x the exact
// int32 sums dot[r * blocks + b] (over sub-blocks s of scale_s times the
// nibbles' dot product with x) and mins[r * blocks + b] (of min_s times
// x's sum over the sub-block). Each instruction set computes the dots its
// own way.
struct RowSums {
  float* d;
  float* dmin;
  int32_t* dot;
  int32_t* mins;
};
constexpr int kMaxRows = 4;
using RowSumsFn = void (*)(const QuantizedRow* x, const uint8_t* row, int64_t blocks, const RowSums& out);

// Super-block b's scales (into `scales`, for the dots) and the minimums'
// sums for kRows rows of x: the scalar part every kernel shares (d and dmin
// each converts its own way, exactly).
template <int kRows>
__attribute__((always_inline)) inline void BlockScalesAndMins(const QuantizedRow* x, const uint8_t* block, int64_t b,
                                                              int64_t blocks, uint8_t* scales, const RowSums& out) {
  uint8_t mins[kSubBlocks];
  GgmlKScalesAndMins(block + kScalesOffset, scales, mins);
  for (int r = 0; r < kRows; ++r) {
    int32_t sum = 0;
    for (int s = 0; s < kSubBlocks; ++s) sum += mins[s] * x[r].sums[b * kSubBlocks + s];
    out.mins[r * blocks + b] = sum;
  }
}

// F16C: d and dmin, one instruction.
__attribute__((target("avx2,f16c"))) inline void ScalesF16c(const uint8_t* block, int64_t b, const RowSums& out) {
  int32_t bits;
  std::memcpy(&bits, block, sizeof bits);
  const __m128 both = _mm_cvtph_ps(_mm_cvtsi32_si128(bits));
  out.d[b] = _mm_cvtss_f32(both);
  out.dmin[b] = _mm_cvtss_f32(_mm_shuffle_ps(both, both, 1));
}

template <int kRows>
void RowSumsScalar(const QuantizedRow* x, const uint8_t* row, int64_t blocks, const RowSums& out) {
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* block = row + b * kQ4KBlockBytes;
    const uint8_t* nibbles = block + kNibblesOffset;
    uint8_t scales[kSubBlocks];
    BlockScalesAndMins<kRows>(x, block, b, blocks, scales, out);
    uint16_t bits[2];
    std::memcpy(bits, block, sizeof bits);
    out.d[b] = F16ToF32(bits[0]);
    out.dmin[b] = F16ToF32(bits[1]);
    for (int r = 0; r < kRows; ++r) {
      const int8_t* q = x[r].q + b * kQ4KBlockElements;
      int32_t sum = 0;
      for (int j = 0; j < 4; ++j) {
        int32_t low = 0, high = 0;
        for (int l = 0; l < 32; ++l) {
          low += (nibbles[32 * j + l] & 0xF) * q[64 * j + l];
          high += (nibbles[32 * j + l] >> 4) * q[64 * j + 32 + l];
        }
        sum += scales[2 * j] * low + scales[2 * j + 1] * high;
      }
      out.dot[r * blocks + b] = sum;
    }
  }
}

__attribute__((target("avx2"))) inline int32_t HorizontalSum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// How far ahead of its super-block a kernel asks for weights.
constexpr int64_t kQ4KPrefetchBytes = 1024;

// AVX2: vpmaddubsw multiplies the unsigned nibbles by signed x (pairs fit
// in int16: 2 * 15 * 127), vpmaddwd by the sub-block's scale (<= 63) into
// int32, vpaddd accumulates. RowSumsVnni is its twin with vpdpwssd doing
// the last two in one: written twice because a shared body would take one
// target attribute, and the other set's intrinsics cannot inline into it.
// (vpdpbusd would take the nibbles times x in one step, but its int32 sums
// then need the scale in a 32-bit multiply, slower than the 16-bit one.)
template <int kRows>
__attribute__((target("avx2,f16c"))) void RowSumsAvx2(const QuantizedRow* x, const uint8_t* row, int64_t blocks,
                                                 const RowSums& out) {
  const __m256i low_nibble = _mm256_set1_epi8(0xF);
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* block = row + b * kQ4KBlockBytes;
    __builtin_prefetch(block + kQ4KPrefetchBytes);
    uint8_t scales[kSubBlocks];
    BlockScalesAndMins<kRows>(x, block, b, blocks, scales, out);
    ScalesF16c(block, b, out);
    __m256i acc[kRows];
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) acc[r] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + kNibblesOffset + 32 * j));
      const __m256i low = _mm256_and_si256(v, low_nibble), high = _mm256_and_si256(_mm256_srli_epi16(v, 4), low_nibble);
      const __m256i low_scale = _mm256_set1_epi16(scales[2 * j]), high_scale = _mm256_set1_epi16(scales[2 * j + 1]);
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r) {
        const int8_t* q = x[r].q + b * kQ4KBlockElements + 64 * j;
        const __m256i xl = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
        const __m256i xh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32));
        acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(_mm256_maddubs_epi16(low, xl), low_scale));
        acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(_mm256_maddubs_epi16(high, xh), high_scale));
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) out.dot[r * blocks + b] = HorizontalSum(acc[r]);
  }
}

// AVX-512 VNNI on ymm: the twin of RowSumsAvx2 (see there).
template <int kRows>
__attribute__((target("avx2,f16c,avx512vnni,avx512vl"))) void RowSumsVnni(const QuantizedRow* x, const uint8_t* row,
                                                                    int64_t blocks, const RowSums& out) {
  const __m256i low_nibble = _mm256_set1_epi8(0xF);
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* block = row + b * kQ4KBlockBytes;
    __builtin_prefetch(block + kQ4KPrefetchBytes);
    uint8_t scales[kSubBlocks];
    BlockScalesAndMins<kRows>(x, block, b, blocks, scales, out);
    ScalesF16c(block, b, out);
    __m256i acc[kRows];
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) acc[r] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + kNibblesOffset + 32 * j));
      const __m256i low = _mm256_and_si256(v, low_nibble), high = _mm256_and_si256(_mm256_srli_epi16(v, 4), low_nibble);
      const __m256i low_scale = _mm256_set1_epi16(scales[2 * j]), high_scale = _mm256_set1_epi16(scales[2 * j + 1]);
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r) {
        const int8_t* q = x[r].q + b * kQ4KBlockElements + 64 * j;
        const __m256i xl = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
        const __m256i xh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32));
        acc[r] = _mm256_dpwssd_epi32(acc[r], _mm256_maddubs_epi16(low, xl), low_scale);
        acc[r] = _mm256_dpwssd_epi32(acc[r], _mm256_maddubs_epi16(high, xh), high_scale);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) out.dot[r * blocks + b] = HorizontalSum(acc[r]);
  }
}

// One instruction set's kernels, by row count of x ([kRows - 1]).
struct Q4KKernels {
  RowSumsFn rows[kMaxRows];
};

KernelDispatch<Q4KKernels, 3>& ChosenKernels() {
  static KernelDispatch<Q4KKernels, 3> kernels({{
      {"avx512vnni", CpuRunsAvx512Vnni, {{RowSumsVnni<1>, RowSumsVnni<2>, RowSumsVnni<3>, RowSumsVnni<4>}}},
      {"avx2", CpuRunsAvx2FmaF16c, {{RowSumsAvx2<1>, RowSumsAvx2<2>, RowSumsAvx2<3>, RowSumsAvx2<4>}}},
      {"scalar", AnyX86_64, {{RowSumsScalar<1>, RowSumsScalar<2>, RowSumsScalar<3>, RowSumsScalar<4>}}},
  }});
  return kernels;
}

// y[r * stride] for `rows` rows of x and one weight row, from its sums:
// per super-block, dx * (d * dot - dmin * mins), in f32, in block order.
// Shared by every kernel (and built for the baseline target, without FMA
// contraction), so all give the same bits.
void CombineRow(const QuantizedRow* x, int rows, int64_t blocks, const RowSums& sums, float* y, int64_t stride) {
  for (int r = 0; r < rows; ++r) {
    float acc = 0;
    for (int64_t b = 0; b < blocks; ++b) {
      const float dot = static_cast<float>(sums.dot[r * blocks + b]);
      const float mins = static_cast<float>(sums.mins[r * blocks + b]);
      acc += x[r].d[b] * (sums.d[b] * dot - sums.dmin[b] * mins);
    }
    y[r * stride] = acc;
  }
}

// Weight rows per task.
constexpr int64_t kRowsPerTask = 16;

}  // namespace

std::string_view Q4KKernel() { return ChosenKernels().name(); }

bool ForceQ4KKernelForTesting(std::string_view name) { return ChosenKernels().ForceForTesting(name); }

absl::StatusOr<Tensor> PackQ4KWeight(const Tensor& w) {
  if (w.rank() != 2 || w.dim(1) % kQ4KBlockElements != 0) {
    return absl::InvalidArgumentError(absl::StrCat("PackQ4KWeight: ", w.DebugString(),
                                                   ": expected rows of whole super-blocks of ", kQ4KBlockElements));
  }
  ASSIGN_OR_RETURN(Tensor packed, Tensor::Zeros(DType::kQ4_K, w.shape()));
  std::memcpy(packed.mutable_raw(), w.raw(), w.bytes());
  return packed.Relabeled(w.shape(), TensorLayout::kLinearPanels);
}

void WidenQ4KPanel(const Tensor& w, int64_t panel, float* out) {
  const int64_t rows = w.dim(0), in = w.dim(1), row_bytes = in / kQ4KBlockElements * kQ4KBlockBytes;
  const int64_t first = panel * kPanelWidth, count = std::min<int64_t>(kPanelWidth, rows - first);
  const uint8_t* weights = static_cast<const uint8_t*>(w.raw()) + first * row_bytes;
  // A super-block of each row decoded side by side (in L1), then written
  // down the panel line by line. Decoding whole rows first read them back
  // 32 streams a power of two apart, which thrashed the cache sets; the
  // tile's rows are padded for the same reason.
  constexpr int64_t kTileStride = kQ4KBlockElements + 16;
  float tile[kPanelWidth * kTileStride];
  for (int64_t b = 0; b < in / kQ4KBlockElements; ++b) {
    for (int64_t c = 0; c < count; ++c) {
      // A whole super-block of a known type: cannot fail.
      DecodeGgmlRow(static_cast<uint32_t>(GgmlType::kQ4_K), weights + c * row_bytes + b * kQ4KBlockBytes,
                    kQ4KBlockElements, tile + c * kTileStride)
          .IgnoreError();
    }
    for (int64_t k = 0; k < kQ4KBlockElements; ++k) {
      float* line = out + (b * kQ4KBlockElements + k) * kPanelWidth;
      for (int64_t c = 0; c < count; ++c) line[c] = tile[c * kTileStride + k];
      for (int64_t c = count; c < kPanelWidth; ++c) line[c] = 0.0f;
    }
  }
}

void LinearQ4K(const float* x, int64_t n, const Tensor& w, float* y, ThreadPool& pool) {
  const int64_t out = w.dim(0), in = w.dim(1), blocks = in / kQ4KBlockElements;
  const int64_t row_bytes = blocks * kQ4KBlockBytes;
  // x quantized once per call, shared by every thread.
  thread_local std::vector<int8_t> xq;
  thread_local std::vector<float> xd;
  thread_local std::vector<int16_t> xs;
  xq.resize(n * in);
  xd.resize(n * blocks);
  xs.resize(n * blocks * kSubBlocks);
  for (int64_t b = 0; b < n * blocks; ++b) {
    xd[b] = QuantizeSuperBlock(x + b * kQ4KBlockElements, xq.data() + b * kQ4KBlockElements,
                               xs.data() + b * kSubBlocks);
  }
  const Q4KKernels& kernel = ChosenKernels().kernel();
  // The workers see their own thread_locals: hand them the caller's rows.
  const int8_t* q = xq.data();
  const float* d = xd.data();
  const int16_t* s = xs.data();
  const uint8_t* weights = static_cast<const uint8_t*>(w.raw());
  pool.ParallelFor((out + kRowsPerTask - 1) / kRowsPerTask, 1, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> scales;
    thread_local std::vector<int32_t> ints;
    scales.resize(2 * blocks);
    ints.resize(2 * kMaxRows * blocks);
    const RowSums sums = {scales.data(), scales.data() + blocks, ints.data(), ints.data() + kMaxRows * blocks};
    for (int64_t o = begin * kRowsPerTask; o < std::min(out, end * kRowsPerTask); ++o) {
      const uint8_t* row = weights + o * row_bytes;
      for (int64_t r = 0; r < n; r += kMaxRows) {
        const int rows = static_cast<int>(std::min<int64_t>(kMaxRows, n - r));
        QuantizedRow xr[kMaxRows];
        for (int i = 0; i < rows; ++i) {
          xr[i] = {q + (r + i) * in, d + (r + i) * blocks, s + (r + i) * blocks * kSubBlocks};
        }
        kernel.rows[rows - 1](xr, row, blocks, sums);
        CombineRow(xr, rows, blocks, sums, y + r * out + o, out);
      }
    }
  });
}

}  // namespace llama::cpu
