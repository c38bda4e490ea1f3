#include "ops/cpu/linear.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string_view>
#include <vector>

#include "ops/cast.h"
#include "ops/cpu/linear_q8.h"
#include "ops/cpu/simd.h"
#include "ops/quantize.h"

namespace llama::cpu {
namespace {

using simd::Float8;
using simd::Load8;
using simd::Scalar;

// Dot products of kRows rows of x with kCols weight rows: a register tile
// of eight-wide partial sums, each input loaded once for the whole tile.
template <int kRows, int kCols, typename Weight>
__attribute__((always_inline)) inline void DotTile(const float* const* x, const Weight* const* w, int64_t n,
                                                   float* out /* [kRows][kCols] */) {
  Float8 s[kRows][kCols] = {};
  int64_t i = 0;
  // Unrolled by force: GCC at -O2 may otherwise keep the tile's sums in
  // memory (a store and a reload per FMA, measured at a third of the speed).
  for (; i + 8 <= n; i += 8) {
    Float8 wv[kCols];
#pragma GCC unroll 4
    for (int c = 0; c < kCols; ++c) wv[c] = Load8(w[c] + i);
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      const Float8 xv = Load8(x[r] + i);
#pragma GCC unroll 4
      for (int c = 0; c < kCols; ++c) s[r][c] += xv * wv[c];
    }
  }
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < kCols; ++c) {
      float sum = simd::Sum(s[r][c]);
      for (int64_t j = i; j < n; ++j) sum += x[r][j] * Scalar(w[c][j]);
      out[r * kCols + c] = sum;
    }
  }
}

// Decode at batch 1: one weight row at a time, with four independent sums
// over k (the FMA latency hidden without other weight rows in flight), so
// the weights are read as one sequential stream, which the prefetchers
// follow best. On the bench model (bf16 shard) decode went from 119-121 to
// 92-95 ms/step on one thread and 73-78 to 56-71 on two (three interleaved
// pairs each), against four-row tiles; at batch 2 the same idea measured no
// gain (88-89 vs 90-98 ms/step), so two rows keep the 2 x 4 tile. The outputs are summed in another order
// than in the tiles: a row decoded alone can differ in the last bits from
// the same row in a batch.
template <typename Weight>
__attribute__((always_inline)) inline void DotSequential(const float* x, const Weight* w, int64_t n, float* out) {
  Float8 s[4] = {};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) s[k] += Load8(x + i + 8 * k) * Load8(w + i + 8 * k);
  }
  float sum = simd::Sum((s[0] + s[1]) + (s[2] + s[3]));
  for (; i < n; ++i) sum += x[i] * Scalar(w[i]);
  *out = sum;
}

// out[r][c] = dot(x[r], w[c]) for `rows` (1..4) rows and `cols` (1..4)
// weight rows of f32, bf16 or f16.
template <typename Weight>
__attribute__((always_inline)) inline void DotRowsImpl(const float* const* x, int rows, const Weight* const* w,
                                                       int cols, int64_t n, float* out) {
  if (rows == 1) {  // Weight rows one after another (see DotSequential).
    for (int c = 0; c < cols; ++c) DotSequential(x[0], w[c], n, out + c);
    return;
  }
  if (cols == 4) return DotTile<2, 4>(x, w, n, out);
  if (cols == 3) {
    switch (rows) {
      case 4:
        return DotTile<4, 3>(x, w, n, out);
      case 3:
        return DotTile<3, 3>(x, w, n, out);
      case 2:
        return DotTile<2, 3>(x, w, n, out);
      default:
        return DotTile<1, 3>(x, w, n, out);
    }
  }
  if (cols == 2) {
    switch (rows) {
      case 4:
        return DotTile<4, 2>(x, w, n, out);
      case 3:
        return DotTile<3, 2>(x, w, n, out);
      case 2:
        return DotTile<2, 2>(x, w, n, out);
      default:
        return DotTile<1, 2>(x, w, n, out);
    }
  }
  switch (rows) {
    case 4:
      return DotTile<4, 1>(x, w, n, out);
    case 3:
      return DotTile<3, 1>(x, w, n, out);
    case 2:
      return DotTile<2, 1>(x, w, n, out);
    default:
      return DotTile<1, 1>(x, w, n, out);
  }
}

LLAMA_DISPATCH_V3(void, DotRows, (const float* const* x, int rows, const float* const* w, int cols, int64_t n, float* out),
                  (x, rows, w, cols, n, out))

// 16-bit weights come in two types each (see WithWeights): the generic
// ones for baseline code, F16Hw/Bf16Hw (v3 instructions) where UseV3().
void DotRows(const float* const* x, int rows, const uint16_t* const* w, int cols, int64_t n, float* out) {
  DotRowsImpl(x, rows, w, cols, n, out);
}

void DotRows(const float* const* x, int rows, const simd::F16* const* w, int cols, int64_t n, float* out) {
  DotRowsImpl(x, rows, w, cols, n, out);
}

LLAMA_V3
void DotRows(const float* const* x, int rows, const simd::F16Hw* const* w, int cols, int64_t n, float* out) {
  DotRowsImpl(x, rows, w, cols, n, out);
}

LLAMA_V3
void DotRows(const float* const* x, int rows, const simd::Bf16Hw* const* w, int cols, int64_t n, float* out) {
  DotRowsImpl(x, rows, w, cols, n, out);
}

// Computes y rows [first, first + count) from `block` (count weight rows of
// `in` elements, f32 or bf16) for every row of x.
template <typename Weight>
void BlockTimesX(const float* x, int64_t n, const Weight* block, int64_t count, int64_t in, int64_t out,
                 int64_t first, float* y) {
  for (int64_t i = 0; i < n; i += 4) {
    const int tile_rows = static_cast<int>(std::min<int64_t>(4, n - i));
    const float* xs[4] = {x + i * in, x + std::min(i + 1, n - 1) * in, x + std::min(i + 2, n - 1) * in,
                          x + std::min(i + 3, n - 1) * in};
    // Three weight rows per tile when x has 3 or 4 rows (12 sums + 3 + 1
    // registers of the 16): each widened weight vector serves more FMAs;
    // measured at batch 8, 226 -> 198-209 ms/step on the bench model. Four
    // for 2 rows (more weight rows streaming at once and more FMA chains:
    // 123-125 -> 103-107 ms/step at batch 2); one row takes them one after
    // another (DotSequential).
    const int max_cols = tile_rows >= 3 ? 3 : 4;
    for (int64_t r = 0; r < count; r += max_cols) {
      const int cols = static_cast<int>(std::min<int64_t>(max_cols, count - r));
      const Weight* ws[4] = {block + r * in, block + std::min(r + 1, count - 1) * in,
                             block + std::min(r + 2, count - 1) * in, block + std::min(r + 3, count - 1) * in};
      float dots[12];
      DotRows(xs, tile_rows, ws, cols, in, dots);
      for (int k = 0; k < tile_rows; ++k) {
        for (int c = 0; c < cols; ++c) y[(i + k) * out + first + r + c] = dots[k * cols + c];
      }
    }
  }
}

// Prefill (many rows of x): an outer-product kernel over a packed panel,
// as BLIS and OpenBLAS do. A block of kPanelWidth weight rows is widened and
// transposed once into panel[k][kPanelWidth] (in L2); a tile of kRows rows
// of x then accumulates y[tile][block] in registers, one broadcast x value
// times one panel line of vectors per step, with no horizontal sums. Kept
// here rather than calling OpenBLAS: the weights are bf16, and Debian's
// runtime-dispatching OpenBLAS would add 30 MB to every binary.
constexpr int kPanelWidth = 32;

template <typename Vec, int kRows>
__attribute__((always_inline)) inline void PanelTile(const float* const* x, const float* panel, int64_t depth,
                                                     float* const* y, int columns) {
  constexpr int kLanes = sizeof(Vec) / sizeof(float), kVecs = kPanelWidth / kLanes;
  Vec acc[kRows][kVecs] = {};
  for (int64_t k = 0; k < depth; ++k) {
    Vec line[kVecs];
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) std::memcpy(&line[v], panel + k * kPanelWidth + v * kLanes, sizeof(Vec));
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) {
      // A broadcast: x - 0.0f is x exactly, so it folds away (x + 0.0f
      // would not: -0.0f + 0.0f is +0.0f).
      const Vec xv = x[r][k] - Vec{};
#pragma GCC unroll 4
      for (int v = 0; v < kVecs; ++v) acc[r][v] += xv * line[v];
    }
  }
  for (int r = 0; r < kRows; ++r) {
    if (y[r] == nullptr) continue;
    if (columns == kPanelWidth) {
      std::memcpy(y[r], acc[r], sizeof acc[r]);
    } else {
      float row[kPanelWidth];
      std::memcpy(row, acc[r], sizeof row);
      std::memcpy(y[r], row, columns * sizeof(float));
    }
  }
}

// y[i, first + c] for every row i of x and c < columns, from a packed panel.
template <typename Vec, int kRows>
__attribute__((always_inline)) inline void PanelTimesXImpl(const float* x, int64_t n, int64_t in, const float* panel,
                                                           int columns, float* y, int64_t out, int64_t first) {
  for (int64_t i = 0; i < n; i += kRows) {
    const float* xs[kRows];
    float* ys[kRows];
    for (int r = 0; r < kRows; ++r) {
      // Past the last row: recompute the last row, keep nothing.
      xs[r] = x + std::min(i + r, n - 1) * in;
      ys[r] = i + r < n ? y + (i + r) * out + first : nullptr;
    }
    PanelTile<Vec, kRows>(xs, panel, in, ys, columns);
  }
}

typedef float Float16 __attribute__((vector_size(64)));

// One instance per instruction set, picked once (PrefillKernel): 16 zmm
// sums on AVX-512, 12 ymm sums on AVX2, and the AVX2 shape (as xmm pairs)
// for any other x86-64.
__attribute__((target("arch=x86-64-v4"))) void PanelTimesXAvx512(const float* x, int64_t n, int64_t in,
                                                                 const float* panel, int columns, float* y,
                                                                 int64_t out, int64_t first) {
  PanelTimesXImpl<Float16, 8>(x, n, in, panel, columns, y, out, first);
}

__attribute__((target("arch=x86-64-v3"))) void PanelTimesXAvx2(const float* x, int64_t n, int64_t in,
                                                               const float* panel, int columns, float* y,
                                                               int64_t out, int64_t first) {
  PanelTimesXImpl<Float8, 3>(x, n, in, panel, columns, y, out, first);
}

void PanelTimesXBaseline(const float* x, int64_t n, int64_t in, const float* panel, int columns, float* y,
                         int64_t out, int64_t first) {
  PanelTimesXImpl<Float8, 3>(x, n, in, panel, columns, y, out, first);
}

using PanelTimesXFn = void (*)(const float*, int64_t, int64_t, const float*, int, float*, int64_t, int64_t);

struct PrefillKernelChoice {
  std::string_view name;
  PanelTimesXFn run;
};

const PrefillKernelChoice kPrefillKernels[] = {
    {"avx512", PanelTimesXAvx512}, {"avx2", PanelTimesXAvx2}, {"baseline", PanelTimesXBaseline}};

bool CpuRuns(std::string_view name) {
  __builtin_cpu_init();
  if (name == "avx512") {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx2");
  }
  if (name == "avx2") return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return name == "baseline";
}

std::atomic<const PrefillKernelChoice*>& ChosenPrefillKernel() {
  static std::atomic<const PrefillKernelChoice*> chosen = [] {
    for (const PrefillKernelChoice& k : kPrefillKernels) {
      if (CpuRuns(k.name)) return &k;
    }
    return &kPrefillKernels[2];
  }();
  return chosen;
}

// Widens and transposes weight rows [first, first + count) of w into
// panel[k][kPanelWidth], zero beyond count: 8 x 8 blocks transposed in
// registers (three rounds of two-vector shuffles), the rest one by one.
template <typename Weight>
__attribute__((always_inline)) inline void PackRowsImpl(const Weight* rows, int64_t in, int64_t count, float* panel) {
  int64_t c = 0;
  for (; c + 8 <= count; c += 8) {
    const Weight* src = rows + c * in;
    int64_t k = 0;
    for (; k + 8 <= in; k += 8) {
      Float8 r[8], t[8];
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) r[i] = Load8(src + i * in + k);
      // Swap the off-diagonal 4 x 4 blocks, then 2 x 2 blocks within them,
      // then single elements: row j ends up holding column j.
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        t[i] = __builtin_shufflevector(r[i], r[i + 4], 0, 1, 2, 3, 8, 9, 10, 11);
        t[i + 4] = __builtin_shufflevector(r[i], r[i + 4], 4, 5, 6, 7, 12, 13, 14, 15);
      }
#pragma GCC unroll 2
      for (int g = 0; g < 8; g += 4) {
#pragma GCC unroll 2
        for (int i = 0; i < 2; ++i) {
          r[g + i] = __builtin_shufflevector(t[g + i], t[g + i + 2], 0, 1, 8, 9, 4, 5, 12, 13);
          r[g + i + 2] = __builtin_shufflevector(t[g + i], t[g + i + 2], 2, 3, 10, 11, 6, 7, 14, 15);
        }
      }
#pragma GCC unroll 4
      for (int m = 0; m < 8; m += 2) {
        t[m] = __builtin_shufflevector(r[m], r[m + 1], 0, 8, 2, 10, 4, 12, 6, 14);
        t[m + 1] = __builtin_shufflevector(r[m], r[m + 1], 1, 9, 3, 11, 5, 13, 7, 15);
      }
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) std::memcpy(panel + (k + j) * kPanelWidth + c, &t[j], sizeof(Float8));
    }
    for (; k < in; ++k) {
      for (int i = 0; i < 8; ++i) panel[k * kPanelWidth + c + i] = Scalar(src[i * in + k]);
    }
  }
  for (; c < count; ++c) {
    for (int64_t k = 0; k < in; ++k) panel[k * kPanelWidth + c] = Scalar(rows[c * in + k]);
  }
}

LLAMA_DISPATCH_V3(void, PackRows, (const float* rows, int64_t in, int64_t count, float* panel), (rows, in, count, panel))

void PackRows(const uint16_t* rows, int64_t in, int64_t count, float* panel) { PackRowsImpl(rows, in, count, panel); }
void PackRows(const simd::F16* rows, int64_t in, int64_t count, float* panel) { PackRowsImpl(rows, in, count, panel); }
LLAMA_V3
void PackRows(const simd::F16Hw* rows, int64_t in, int64_t count, float* panel) { PackRowsImpl(rows, in, count, panel); }
LLAMA_V3
void PackRows(const simd::Bf16Hw* rows, int64_t in, int64_t count, float* panel) { PackRowsImpl(rows, in, count, panel); }

// Calls f with w's data as f32, bf16 or f16 weights: as simd::Bf16Hw and
// F16Hw with the v3 kernels (widened by v3 instructions), else as uint16_t
// and simd::F16 (portable widening).
template <typename Fn>
void WithWeights(const Tensor& w, Fn&& f) {
  switch (w.dtype()) {
    case DType::kF32:
      return f(w.f32());
    case DType::kBF16:
      if (simd::UseV3()) return f(static_cast<const simd::Bf16Hw*>(w.raw()));
      return f(static_cast<const uint16_t*>(w.raw()));
    default:  // Linear's weights are f32, bf16 or f16 (the shard reader checks).
      if (simd::UseV3()) return f(static_cast<const simd::F16Hw*>(w.raw()));
      return f(static_cast<const simd::F16*>(w.raw()));
  }
}

void PackPanel(const Tensor& w, int64_t first, int64_t count, float* panel) {
  const int64_t in = w.dim(1);
  if (count < kPanelWidth) std::fill(panel, panel + in * kPanelWidth, 0.0f);
  if (w.dtype() == DType::kQ8_0) {
    // Prefill keeps f32 activations: int8 weights are widened like 16-bit ones.
    thread_local std::vector<float> rows;
    rows.resize(count * in);
    DequantizeQ8_0(static_cast<const uint8_t*>(w.raw()) + first * (in / kQ8BlockElements) * kQ8BlockBytes,
                   count * in, rows.data());
    PackRows(rows.data(), in, count, panel);
    return;
  }
  WithWeights(w, [&](const auto* data) { PackRows(data + first * in, in, count, panel); });
}

// Weight rows per task when decoding.
constexpr int64_t kRowBlock = 32;

// Up to this many rows of x, Linear streams the weights (decode); above,
// it packs panels (prefill, large batches). Measured crossover on the bench
// model: streaming wins at batch 12 (123 vs 130 ms/step), panels at 16
// (144 vs 158).
constexpr int64_t kDecodeRows = 12;

}  // namespace

std::string_view PrefillKernel() { return ChosenPrefillKernel().load()->name; }

std::string_view Int8Kernel() { return Q8Kernel(); }

bool ForceInt8KernelForTesting(std::string_view name) { return ForceQ8KernelForTesting(name); }

bool ForcePrefillKernelForTesting(std::string_view name) {
  for (const PrefillKernelChoice& k : kPrefillKernels) {
    if (k.name == name && CpuRuns(name)) {
      ChosenPrefillKernel().store(&k);
      return true;
    }
  }
  return false;
}

void Linear(const float* x, int64_t n, const Tensor& w, float* y, ThreadPool& pool) {
  const int64_t out = w.dim(0), in = w.dim(1);
  if (n > kDecodeRows) {
    const PanelTimesXFn run = ChosenPrefillKernel().load()->run;
    const int64_t panels = (out + kPanelWidth - 1) / kPanelWidth;
    pool.ParallelFor(panels, 1, [&](int64_t begin, int64_t end) {
      // Per thread, sized once: no allocation per call once warm.
      thread_local std::vector<float> panel;
      if (static_cast<int64_t>(panel.size()) < in * kPanelWidth) panel.resize(in * kPanelWidth);
      for (int64_t p = begin; p < end; ++p) {
        const int64_t first = p * kPanelWidth, count = std::min<int64_t>(kPanelWidth, out - first);
        PackPanel(w, first, count, panel.data());
        run(x, n, in, panel.data(), static_cast<int>(count), y, out, first);
      }
    });
    return;
  }
  if (w.dtype() == DType::kQ8_0) return LinearQ8(x, n, w, y, pool);
  // Few activation rows (decode): each weight row is read once, 16-bit
  // weights widened in registers as they stream by, and dotted with every
  // row of x.
  const int64_t blocks = (out + kRowBlock - 1) / kRowBlock;
  pool.ParallelFor(blocks, 1, [&](int64_t begin, int64_t end) {
    WithWeights(w, [&](const auto* data) {
      for (int64_t b = begin; b < end; ++b) {
        const int64_t first = b * kRowBlock, count = std::min(kRowBlock, out - first);
        BlockTimesX(x, n, data + first * in, count, in, out, first, y);
      }
    });
  });
}

}  // namespace llama::cpu
