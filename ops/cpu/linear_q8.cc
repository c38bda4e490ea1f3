#include "ops/cpu/linear_q8.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ops/cast.h"
#include "ops/cpu/cache_aligned.h"
#include "ops/cpu/kernel_dispatch.h"
#include "ops/cpu/linear.h"
#include "ops/cpu/simd.h"
#include "ops/dtype.h"
#include "ops/quantize.h"

namespace llama::cpu {
namespace {

// The packed layout (PackQ8Weight): rows in groups of eight; per group and
// block of 32 columns, 256 bytes of int8 weights as eight chunks of four
// columns, each chunk the eight rows' four bytes side by side (so one
// 32-byte load gives eight rows' next four weights, the lanes of vpdpbusd);
// after all quants, per group and block, the eight rows' f16 scales. A
// group-block is 256 + 16 bytes: the 8 x 34 of eight Q8_0 rows.
constexpr int64_t kGroupRows = 8;
constexpr int64_t kGroupBlockQuants = kGroupRows * kQ8BlockElements;  // 256

struct PackedQ8 {
  const int8_t* quants;    // [groups][blocks][8 chunks][8 rows][4]
  const uint16_t* scales;  // [groups][blocks][8 rows]
  int64_t groups, blocks;

  explicit PackedQ8(const Tensor& w)
      : groups((w.dim(0) + kGroupRows - 1) / kGroupRows), blocks(w.dim(1) / kQ8BlockElements) {
    quants = static_cast<const int8_t*>(w.raw());
    scales = reinterpret_cast<const uint16_t*>(quants + groups * blocks * kGroupBlockQuants);
  }
  const int8_t* Quants(int64_t g, int64_t b) const { return quants + (g * blocks + b) * kGroupBlockQuants; }
  const uint16_t* Scales(int64_t g, int64_t b) const { return scales + (g * blocks + b) * kGroupRows; }
};

// The rows of x the kernels take at once (at most; Q8Kernels::max_rows
// says how many each takes), each quantized to int8 per block of 32 with
// an f32 scale (llama.cpp's rule for activations).
constexpr int kMaxRows = 8;
struct QuantizedRows {
  const int8_t* q[kMaxRows];
  const float* d[kMaxRows];
};

// y[r][0 .. 8) = x row r times group g (rows 8g .. 8g + 8), for `rows`
// rows of x: the portable version and the tests' reference shape.
void GroupScalar(const QuantizedRows& x, int rows, const PackedQ8& w, int64_t g, float (*y)[kGroupRows]) {
  for (int r = 0; r < rows; ++r) {
    for (int lane = 0; lane < kGroupRows; ++lane) {
      float sum = 0;
      for (int64_t b = 0; b < w.blocks; ++b) {
        const int8_t* quants = w.Quants(g, b);
        int32_t isum = 0;
        for (int c = 0; c < 8; ++c) {
          for (int j = 0; j < 4; ++j) isum += quants[c * 32 + lane * 4 + j] * x.q[r][b * 32 + c * 4 + j];
        }
        sum += F16ToF32(w.Scales(g, b)[lane]) * x.d[r][b] * static_cast<float>(isum);
      }
      y[r][lane] = sum;
    }
  }
}

// The vector kernels ask for the weights WeightPrefetchBytes() ahead
// (linear.h: on Intel CPUs 2 KB, elsewhere none).

// y[r][0 .. 8) = x row r times group g, for kRows rows of x: each
// kernel is a template on the row count, so that every accumulator stays
// in a register (indexed by a variable, they lived on the stack).
using GroupRowsFn = void (*)(const QuantizedRows& x, const PackedQ8& w, int64_t g, float (*y)[kGroupRows]);

// AVX2: x stays signed; |w| (unsigned) times sign(w) x (signed) by
// vpmaddubsw, whose pairs fit in int16 as |w| <= 127, then vpmaddwd.
// GroupVnniRows is its twin for AVX-512 VNNI, the same loop with another
// block product: written twice because a shared body would take one target
// attribute, and the intrinsics of the other set cannot be inlined into it.
template <int kRows>
__attribute__((target("avx2,fma,f16c"))) void GroupAvx2Rows(const QuantizedRows& x, const PackedQ8& w, int64_t g,
                                                             float (*y)[kGroupRows]) {
  const int64_t ahead = WeightPrefetchBytes();
  const __m256i ones16 = _mm256_set1_epi16(1);
  __m256 acc[kRows];
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < w.blocks; ++b) {
    const int8_t* quants = w.Quants(g, b);
    if (ahead != 0) simd::PrefetchAhead(quants, ahead, kGroupBlockQuants);
    __m256i isum[kRows];
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) isum[r] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      const __m256i wv = _mm256_load_si256(reinterpret_cast<const __m256i*>(quants + c * 32));
      const __m256i aw = _mm256_sign_epi8(wv, wv);
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r) {
        int32_t four;
        std::memcpy(&four, x.q[r] + b * kQ8BlockElements + c * 4, 4);
        const __m256i sx = _mm256_sign_epi8(_mm256_set1_epi32(four), wv);
        isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(_mm256_maddubs_epi16(aw, sx), ones16));
      }
    }
    const __m256 ws = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.Scales(g, b))));
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), _mm256_mul_ps(ws, _mm256_set1_ps(x.d[r][b])), acc[r]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r) _mm256_storeu_ps(y[r], acc[r]);
}

// AVX-512 VNNI: x comes offset to unsigned (x + 128: its sign bit flipped,
// once per call), so vpdpbusd multiplies it by w as it is, one instruction
// a row and chunk; 128 times each row's weight sum (one more vpdpbusd, by
// ones, shared by every row of x) comes off each block's exact int32 sums.
// The twin of GroupAvx2Rows (see there).
template <int kRows>
__attribute__((target("avx2,fma,f16c,avx512vnni,avx512vl"))) void GroupVnniRows(const QuantizedRows& x,
                                                                                 const PackedQ8& w, int64_t g,
                                                                                 float (*y)[kGroupRows]) {
  const int64_t ahead = WeightPrefetchBytes();
  const __m256i ones8 = _mm256_set1_epi8(1);
  __m256 acc[kRows];
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < w.blocks; ++b) {
    const int8_t* quants = w.Quants(g, b);
    if (ahead != 0) simd::PrefetchAhead(quants, ahead, kGroupBlockQuants);
    __m256i wsum = _mm256_setzero_si256(), isum[kRows];
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) isum[r] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      const __m256i wv = _mm256_load_si256(reinterpret_cast<const __m256i*>(quants + c * 32));
      wsum = _mm256_dpbusd_epi32(wsum, ones8, wv);
#pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) {
        int32_t four;
        std::memcpy(&four, x.q[r] + b * kQ8BlockElements + c * 4, 4);
        isum[r] = _mm256_dpbusd_epi32(isum[r], _mm256_set1_epi32(four), wv);
      }
    }
    const __m256i offset = _mm256_slli_epi32(wsum, 7);
    const __m256 ws = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.Scales(g, b))));
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      const __m256 dot = _mm256_cvtepi32_ps(_mm256_sub_epi32(isum[r], offset));
      acc[r] = _mm256_fmadd_ps(dot, _mm256_mul_ps(ws, _mm256_set1_ps(x.d[r][b])), acc[r]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) _mm256_storeu_ps(y[r], acc[r]);
}

template <int kRows>
void GroupScalarRows(const QuantizedRows& x, const PackedQ8& w, int64_t g, float (*y)[kGroupRows]) {
  GroupScalar(x, kRows, w, g, y);
}

// One instruction set's kernels, by row count.
struct Q8Kernels {
  GroupRowsFn rows[kMaxRows];  // [kRows - 1], up to max_rows.
  int max_rows;
  bool unsigned_x;  // x's int8 offset by 128 (sign bit flipped).
};

// Rows of x a call. VNNI, eight: its 32 ymm registers hold eight rows'
// sums, and a step of five to eight rows (speculative verification, eight
// sequences) reads the weights once, not in passes of four. TinyLlama shape,
// int8, interleaved, eight against four: 5 rows a step 1.76x -> 1.35-1.37x
// a decode step, batch-8 decode 88.4-88.8 -> 66.1-70.2 ms/step, prefill of
// 512 tokens 136-147 -> 146-152 tokens/s. AVX2, four: its 16 registers
// spill at six (prefill 83 -> 50-57 tokens/s, batch 8 113 -> 154-159 ms).
KernelDispatch<Q8Kernels, 3>& ChosenKernels() {
  static KernelDispatch<Q8Kernels, 3> kernels({{
      {"avx512vnni",
       CpuRunsAvx512Vnni,
       {{GroupVnniRows<1>, GroupVnniRows<2>, GroupVnniRows<3>, GroupVnniRows<4>, GroupVnniRows<5>, GroupVnniRows<6>,
         GroupVnniRows<7>, GroupVnniRows<8>},
        8,
        true}},
      {"avx2",
       CpuRunsAvx2FmaF16c,
       {{GroupAvx2Rows<1>, GroupAvx2Rows<2>, GroupAvx2Rows<3>, GroupAvx2Rows<4>}, 4, false}},
      {"scalar",
       AnyX86_64,
       {{GroupScalarRows<1>, GroupScalarRows<2>, GroupScalarRows<3>, GroupScalarRows<4>}, 4, false}},
  }});
  return kernels;
}

// Groups of eight rows per task: at decode four; with more rows of x than
// a kernel takes (prefill), sixteen, so that x, streamed through once per
// task (the task's weights, up to ~720 KB, staying in L2 meanwhile), is
// read out/128 times a call rather than once per group.
constexpr int64_t kGroupsPerTask = 4;
constexpr int64_t kPrefillGroupsPerTask = 16;

// Group g's dequantized weights into columns [8 * slot, 8 * slot + 8) of an
// f32 panel [in][32]: the same product of the f16 scale and the exact int8
// as DequantizeQ8_0, so bit-identical to it.
void WidenGroupScalar(const PackedQ8& w, int64_t g, int slot, float* panel) {
  for (int64_t b = 0; b < w.blocks; ++b) {
    const int8_t* quants = w.Quants(g, b);
    for (int lane = 0; lane < kGroupRows; ++lane) {
      const float d = F16ToF32(w.Scales(g, b)[lane]);
      for (int c = 0; c < 8; ++c) {
        for (int j = 0; j < 4; ++j) {
          panel[(b * 32 + c * 4 + j) * 32 + slot * kGroupRows + lane] = d * quants[c * 32 + lane * 4 + j];
        }
      }
    }
  }
}

// The same, eight weights an instruction: a chunk's bytes regrouped by
// column (vpshufb within each 128-bit half, then vpermd across them), so
// that each 8 bytes are one column's eight rows.
__attribute__((target("avx2,f16c"))) void WidenGroupAvx2(const PackedQ8& w, int64_t g, int slot, float* panel) {
  const __m256i by_column = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15,  //
                                             0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __m256i halves = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t b = 0; b < w.blocks; ++b) {
    const int8_t* quants = w.Quants(g, b);
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.Scales(g, b))));
    for (int c = 0; c < 8; ++c) {
      const __m256i chunk = _mm256_load_si256(reinterpret_cast<const __m256i*>(quants + c * 32));
      const __m256i columns = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(chunk, by_column), halves);
      alignas(32) int8_t bytes[32];
      _mm256_store_si256(reinterpret_cast<__m256i*>(bytes), columns);
      for (int j = 0; j < 4; ++j) {
        const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes + j * 8)));
        _mm256_storeu_ps(panel + (b * 32 + c * 4 + j) * 32 + slot * kGroupRows, _mm256_mul_ps(d, _mm256_cvtepi32_ps(q)));
      }
    }
  }
}

}  // namespace

std::string_view Q8Kernel() { return ChosenKernels().name(); }

bool ForceQ8KernelForTesting(std::string_view name) { return ChosenKernels().ForceForTesting(name); }

absl::StatusOr<Tensor> PackQ8Weight(const Tensor& w, ThreadPool& pool) {
  const int64_t out = w.dim(0), in = w.dim(1);
  if (in % kQ8BlockElements != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("PackQ8Weight: ", w.DebugString(), ": rows must be whole blocks of ", kQ8BlockElements));
  }
  const int64_t groups = (out + kGroupRows - 1) / kGroupRows, blocks = in / kQ8BlockElements;
  // Eight Q8_0 rows take exactly a group-block's bytes: allocated as q8_0
  // rows, padded to whole groups, zero-filled (zero scales past `out`).
  ASSIGN_OR_RETURN(Tensor packed, Tensor::Zeros(DType::kQ8_0, {groups * kGroupRows, in}));
  int8_t* quants = static_cast<int8_t*>(packed.mutable_raw());
  uint16_t* scales = reinterpret_cast<uint16_t*>(quants + groups * blocks * kGroupBlockQuants);
  const uint8_t* rows = static_cast<const uint8_t*>(w.raw());
  pool.ParallelFor(groups, 1, [&](int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end; ++g) {
      for (int lane = 0; lane < kGroupRows && g * kGroupRows + lane < out; ++lane) {
        const uint8_t* row = rows + (g * kGroupRows + lane) * blocks * kQ8BlockBytes;
        for (int64_t b = 0; b < blocks; ++b) {
          const uint8_t* block = row + b * kQ8BlockBytes;
          std::memcpy(&scales[(g * blocks + b) * kGroupRows + lane], block, 2);
          int8_t* dst = quants + (g * blocks + b) * kGroupBlockQuants;
          for (int c = 0; c < 8; ++c) std::memcpy(dst + c * 32 + lane * 4, block + 2 + c * 4, 4);
        }
      }
    }
  });
  return packed.Relabeled({out, in}, TensorLayout::kLinearPanels);
}

void WidenQ8Panel(const Tensor& w, int64_t panel, float* out) {
  const PackedQ8 packed(w);
  const int64_t in = w.dim(1);
  for (int slot = 0; slot < 4; ++slot) {
    const int64_t g = panel * 4 + slot;
    if (g >= packed.groups) {
      for (int64_t k = 0; k < in; ++k) std::fill_n(out + k * 32 + slot * kGroupRows, kGroupRows, 0.0f);
    } else if (simd::UseV3()) {
      WidenGroupAvx2(packed, g, slot, out);
    } else {
      WidenGroupScalar(packed, g, slot, out);
    }
  }
}

namespace {

// `blocks` blocks of 32 values of x as QuantizeBlock quantizes them (the
// same bits), xor `flip` (0x80 for kernels that take x unsigned).
__attribute__((always_inline)) inline void QuantizeXImpl(const float* x, int64_t blocks, uint8_t flip, int8_t* q,
                                                         float* d) {
  for (int64_t b = 0; b < blocks; ++b) {
    const float* v = x + b * kQ8BlockElements;
    d[b] = simd::AbsMax(v, kQ8BlockElements) / 127;
    const float id = InverseScale(d[b]);
    for (int i = 0; i < kQ8BlockElements; i += 8) {
      const simd::Int8x8 values = simd::Narrow(simd::RoundScaled8(v + i, id)) ^ static_cast<int8_t>(flip);
      std::memcpy(q + b * kQ8BlockElements + i, &values, sizeof values);
    }
  }
}

LLAMA_DISPATCH_V3(void, QuantizeX, (const float* x, int64_t blocks, uint8_t flip, int8_t* q, float* d),
                  (x, blocks, flip, q, d))

}  // namespace

void LinearQ8(const float* x, int64_t n, const Tensor& w, float* y, ThreadPool& pool) {
  const PackedQ8 packed(w);
  const int64_t out = w.dim(0), in = w.dim(1), blocks = packed.blocks;
  // x quantized once per call, shared by every thread.
  thread_local CacheAlignedVector<int8_t> xq;
  thread_local CacheAlignedVector<float> xd;
  xq.resize(n * in);
  xd.resize(n * blocks);
  const Q8Kernels& kernel = ChosenKernels().kernel();
  QuantizeX(x, n * blocks, kernel.unsigned_x ? 0x80 : 0, xq.data(), xd.data());
  // The workers see their own thread_locals: hand them the caller's rows.
  const int8_t* q = xq.data();
  const float* d = xd.data();
  const int64_t groups_per_task = n > kernel.max_rows ? kPrefillGroupsPerTask : kGroupsPerTask;
  pool.ParallelFor((packed.groups + groups_per_task - 1) / groups_per_task, 1, [&](int64_t begin, int64_t end) {
    float sums[kMaxRows][kGroupRows];
    const int64_t first_group = begin * groups_per_task, end_group = std::min(packed.groups, end * groups_per_task);
    for (int64_t r = 0; r < n; r += kernel.max_rows) {
      const int rows = static_cast<int>(std::min<int64_t>(kernel.max_rows, n - r));
      QuantizedRows x;
      for (int i = 0; i < rows; ++i) {
        x.q[i] = q + (r + i) * in;
        x.d[i] = d + (r + i) * blocks;
      }
      for (int64_t g = first_group; g < end_group; ++g) {
        const int64_t first = g * kGroupRows, count = std::min(kGroupRows, out - first);
        kernel.rows[rows - 1](x, packed, g, sums);
        for (int i = 0; i < rows; ++i) std::memcpy(y + (r + i) * out + first, sums[i], count * sizeof(float));
      }
    }
  });
}

}  // namespace llama::cpu
