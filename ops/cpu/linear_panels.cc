#include "ops/cpu/linear_panels.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "ops/cpu/cache_aligned.h"
#include "ops/cpu/kernel_dispatch.h"
#include "ops/cpu/panels.h"
#include "ops/cpu/simd.h"

namespace llama::cpu {
namespace {

using simd::Float16;
using simd::Float8;
using simd::Load16;
using simd::Load8;
using simd::Scalar;

// Prefill (many rows of x): an outer-product kernel over a packed panel,
// as BLIS and OpenBLAS do. A block of kPanelWidth weight rows is widened and
// transposed once into panel[k][kPanelWidth] (in L2); a tile of kRows rows
// of x then accumulates y[tile][block] in registers, one broadcast x value
// times one panel line of vectors per step, with no horizontal sums. Kept
// here rather than calling OpenBLAS: the weights are bf16, and Debian's
// runtime-dispatching OpenBLAS would add 30 MB to every binary. The
// panels are kPanelWidth (panels.h) rows wide.

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

// One instance per instruction set (ChosenPanelKernels).
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

// Decode over packed weights (up to kPackedDecodeRows rows of x): each
// panel line of 32 weights is widened in registers as it streams by and
// multiplied into every row's sums, in PanelTile's order and with its
// expression, so the outputs are bit-identical to the prefill kernel's
// (lanes are independent: the vector width changes nothing). One row of x
// takes two panels at once (eight independent sums hide the FMA latency),
// and so do up to kPairedRowsAvx512 rows in zmm sums; more rows go in
// tiles of up to three (ymm) or eight (zmm, AVX-512) rows of one panel,
// each tile reading the panel once.
template <typename Vec, typename Weight>
__attribute__((always_inline)) inline Vec LoadWidened(const Weight* p) {
  if constexpr (sizeof(Vec) == sizeof(Float8)) {
    return Load8(p);
  } else {
    return Load16(p);
  }
}

// How far ahead (in panel lines, one cache line of bf16 or f16 weights
// each) the decode tiles ask for their panels: the hardware prefetcher
// alone left the tiles waiting on memory (bench model, bf16, old/new
// alternating: batch 8 133-136 -> 102-108 ms/step; 24 lines ahead gave
// 105-111, 96 102-107).
constexpr int64_t kPrefetchDepth = 48;

template <typename Vec, int kRows, int kPanels, typename Weight>
__attribute__((always_inline)) inline void PackedTile(const float* const* x, const Weight* const* panels,
                                                      int64_t depth, float* const* y, const int* columns) {
  constexpr int kLanes = sizeof(Vec) / sizeof(float), kVecs = kPanelWidth / kLanes;
  Vec acc[kRows][kPanels][kVecs] = {};
  for (int64_t k = 0; k < depth; ++k) {
    Vec line[kPanels][kVecs];
#pragma GCC unroll 8
    for (int p = 0; p < kPanels; ++p) __builtin_prefetch(panels[p] + (k + kPrefetchDepth) * kPanelWidth);
#pragma GCC unroll 8
    for (int p = 0; p < kPanels; ++p) {
#pragma GCC unroll 4
      for (int v = 0; v < kVecs; ++v) line[p][v] = LoadWidened<Vec>(panels[p] + k * kPanelWidth + v * kLanes);
    }
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      const Vec xv = x[r][k] - Vec{};  // A broadcast, as in PanelTile.
#pragma GCC unroll 8
      for (int p = 0; p < kPanels; ++p) {
#pragma GCC unroll 4
        for (int v = 0; v < kVecs; ++v) acc[r][p][v] += xv * line[p][v];
      }
    }
  }
  for (int r = 0; r < kRows; ++r) {
    for (int p = 0; p < kPanels; ++p) {
      float row[kPanelWidth];
      std::memcpy(row, acc[r][p], sizeof row);
      if (y[r * kPanels + p] != nullptr) std::memcpy(y[r * kPanels + p], row, columns[p] * sizeof(float));
    }
  }
}

// The decode tiles in the walk's two shapes (ForEachPanelTile, panels.h):
// up to kPairedRows rows of x times a pair of panels (PanelTile2), one row
// in ymm sums whatever Vec; and up to kMaxRows rows times one panel
// (PanelTile1).
template <typename Vec>
struct PanelTile2 {
  template <int kRows, typename Weight>
  __attribute__((always_inline)) static void Run(const float* const* xs, const Weight* const* panels, int64_t depth,
                                                 float* const* ys, const int* columns) {
    if constexpr (kRows == 1) {
      PackedTile<Float8, 1, 2>(xs, panels, depth, ys, columns);
    } else {
      PackedTile<Vec, kRows, 2>(xs, panels, depth, ys, columns);
    }
  }
};

template <typename Vec>
struct PanelTile1 {
  template <int kRows, typename Weight>
  __attribute__((always_inline)) static void Run(const float* const* xs, const Weight* panel, int64_t depth,
                                                 float* const* ys, int columns) {
    const Weight* panels[1] = {panel};
    const int cols[1] = {columns};
    PackedTile<Vec, kRows, 1>(xs, panels, depth, ys, cols);
  }
};

template <typename Vec, int kMaxRows, int kPairedRowsOfVec>
struct PackedTiles {
  static constexpr int kPairedRows = kPairedRowsOfVec;
  template <typename Weight>
  __attribute__((always_inline)) static void Pair(const float* const* xs, int rows, const Weight* const* panels,
                                                  int64_t depth, float* const* ys, const int* columns) {
    TileOfRows<PanelTile2<Vec>, kPairedRows>(rows, xs, panels, depth, ys, columns);
  }
  template <typename Weight>
  __attribute__((always_inline)) static void Rows(const float* const* xs, int rows, const Weight* panel,
                                                  int64_t depth, float* const* ys, int columns) {
    TileOfRows<PanelTile1<Vec>, kMaxRows>(rows, xs, panel, depth, ys, columns);
  }
};

// y rows [0, n) for output panels [first, last) of `packed`.
template <typename Vec, int kMaxRows, int kPairedRows, typename Weight>
__attribute__((always_inline)) inline void PackedTimesXImpl(const float* x, int64_t n, int64_t in,
                                                            const Weight* packed, int64_t first, int64_t last,
                                                            int64_t out, float* y) {
  ForEachPanelTile<PackedTiles<Vec, kMaxRows, kPairedRows>, kMaxRows>(x, in, n, in, packed, first, last, out, y);
}

// The decode kernel of each prefill kernel: the same arithmetic, fused
// multiply-adds where it has them (v3 and v4 code), separate multiplies and
// adds for "baseline"; each takes the weights as the matching widening
// types.
template <typename Vec, int kMaxRows, int kPairedRows, typename Bf16, typename F16>
__attribute__((always_inline)) inline void PackedTimesXTyped(const float* x, int64_t n, int64_t in, const Tensor& w,
                                                             int64_t first, int64_t last, float* y) {
  const int64_t out = w.dim(0);
  switch (w.dtype()) {
    case DType::kF32:
      return PackedTimesXImpl<Vec, kMaxRows, kPairedRows>(x, n, in, w.f32(), first, last, out, y);
    case DType::kBF16:
      return PackedTimesXImpl<Vec, kMaxRows, kPairedRows>(x, n, in, static_cast<const Bf16*>(w.raw()), first, last, out, y);
    default:
      return PackedTimesXImpl<Vec, kMaxRows, kPairedRows>(x, n, in, static_cast<const F16*>(w.raw()), first, last, out, y);
  }
}

// Rows of x that the AVX-512 decode tiles take two panels at a time: the
// sums of six rows times two panels and the four panel vectors are 28 of
// the 32 zmm registers. A step's few rows (speculative decoding's
// verification, a few sequences) are bound by reading the weights, and
// two streams a thread read them faster than one: TinyLlama shape, bf16,
// 5 rows a step against a decode step, interleaved, 1.15-1.23x -> 1.09-1.13x
// (f16 1.27-1.28x -> 1.14-1.19x).
constexpr int kPairedRowsAvx512 = 6;

__attribute__((target("arch=x86-64-v4"))) void PackedTimesXAvx512(const float* x, int64_t n, int64_t in,
                                                                  const Tensor& w, int64_t first, int64_t last,
                                                                  float* y) {
  PackedTimesXTyped<Float16, 8, kPairedRowsAvx512, simd::Bf16Hw, simd::F16Hw>(x, n, in, w, first, last, y);
}

LLAMA_V3 void PackedTimesXAvx2(const float* x, int64_t n, int64_t in, const Tensor& w, int64_t first, int64_t last,
                               float* y) {
  PackedTimesXTyped<Float8, 3, 1, simd::Bf16Hw, simd::F16Hw>(x, n, in, w, first, last, y);
}

void PackedTimesXBaseline(const float* x, int64_t n, int64_t in, const Tensor& w, int64_t first, int64_t last,
                          float* y) {
  PackedTimesXTyped<Float8, 3, 1, uint16_t, simd::F16>(x, n, in, w, first, last, y);
}

// A packed panel's 16-bit weights widened to f32 for the prefill kernel:
// no transposition, the panel is already in its order.
template <typename Weight>
__attribute__((always_inline)) inline void WidenImpl(const Weight* src, int64_t count, float* dst) {
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) simd::Store8(dst + i, Load8(src + i));
  for (; i < count; ++i) dst[i] = Scalar(src[i]);
}
LLAMA_V3 void WidenV3(const Tensor& w, int64_t offset, int64_t count, float* dst) {
  if (w.dtype() == DType::kBF16) return WidenImpl(static_cast<const simd::Bf16Hw*>(w.raw()) + offset, count, dst);
  WidenImpl(static_cast<const simd::F16Hw*>(w.raw()) + offset, count, dst);
}
void WidenBaseline(const Tensor& w, int64_t offset, int64_t count, float* dst) {
  if (w.dtype() == DType::kBF16) return WidenImpl(static_cast<const uint16_t*>(w.raw()) + offset, count, dst);
  WidenImpl(static_cast<const simd::F16*>(w.raw()) + offset, count, dst);
}

using PackedTimesXFn = void (*)(const float*, int64_t, int64_t, const Tensor&, int64_t, int64_t, float*);

// One instruction set's prefill kernel and its decode kernel, and the most
// rows of x a call takes through the decode kernel.
struct PanelKernels {
  PanelTimesXFn prefill;
  PackedTimesXFn decode;
  int64_t decode_rows;
  int paired_rows;  // Rows that read panels in pairs (ForEachPanelTile).
};

// Rows of x per call that the decode kernels take; more go through f32
// panels. Measured on the bench model (bf16): with AVX2-shaped tiles at
// batch 8 the zmm tiles took 166-186 ms/step where widening into f32
// panels took 201-218; with AVX-512 tiles of eight rows and prefetch,
// batch 16 205-219 vs 271-278, batch 24 292-311 vs 352-379, batch 32
// 384-392 vs 436-469, and prefill of 48 or 64 tokens alike (80-93 vs
// 54-88 tokens/s). (AVX2's three-row tiles were not measured past 12.)
constexpr int64_t kPackedDecodeRowsAvx512 = 32;
constexpr int64_t kPackedDecodeRows = 12;

// Picked once (PanelKernelName): 16 zmm sums on AVX-512, 12 ymm sums on AVX2,
// and the AVX2 shape (as xmm pairs) for any other x86-64.
KernelDispatch<PanelKernels, 3>& ChosenPanelKernels() {
  static KernelDispatch<PanelKernels, 3> kernels({{
      {"avx512", CpuRunsAvx512, {PanelTimesXAvx512, PackedTimesXAvx512, kPackedDecodeRowsAvx512, kPairedRowsAvx512}},
      {"avx2", CpuRunsAvx2Fma, {PanelTimesXAvx2, PackedTimesXAvx2, kPackedDecodeRows, 1}},
      {"baseline", AnyX86_64, {PanelTimesXBaseline, PackedTimesXBaseline, kPackedDecodeRows, 1}},
  }});
  return kernels;
}

}  // namespace

void LinearPacked(const float* x, int64_t n, const Tensor& w, float* y, ThreadPool& pool) {
  const int64_t out = w.dim(0), in = w.dim(1);
  const int64_t panels = (out + kPanelWidth - 1) / kPanelWidth;
  const PanelKernels& kernels = ChosenPanelKernels().kernel();
  if (n <= kernels.decode_rows) {
    const PackedTimesXFn decode = kernels.decode;
    const int64_t step = PanelsPerTask(n, kernels.paired_rows);
    pool.ParallelFor((panels + step - 1) / step, 1, [&](int64_t begin, int64_t end) {
      decode(x, n, in, w, begin * step, std::min(panels, end * step), y);
    });
    return;
  }
  pool.ParallelFor(panels, 1, [&](int64_t begin, int64_t end) {
    // Per thread, sized once: no allocation per call once warm.
    thread_local CacheAlignedVector<float> widened;
    if (w.dtype() != DType::kF32 && static_cast<int64_t>(widened.size()) < in * kPanelWidth) {
      widened.resize(in * kPanelWidth);
    }
    for (int64_t p = begin; p < end; ++p) {
      const int64_t first = p * kPanelWidth, count = std::min<int64_t>(kPanelWidth, out - first);
      const float* panel = w.f32() + first * in;
      if (w.dtype() != DType::kF32) {
        if (simd::UseV3()) {
          WidenV3(w, first * in, in * kPanelWidth, widened.data());
        } else {
          WidenBaseline(w, first * in, in * kPanelWidth, widened.data());
        }
        panel = widened.data();
      }
      kernels.prefill(x, n, in, panel, static_cast<int>(count), y, out, first);
    }
  });
}

PanelTimesXFn PanelPrefillKernel() { return ChosenPanelKernels().kernel().prefill; }

std::string_view PanelKernelName() { return ChosenPanelKernels().name(); }

bool ForcePanelKernelForTesting(std::string_view name) { return ChosenPanelKernels().ForceForTesting(name); }

}  // namespace llama::cpu
