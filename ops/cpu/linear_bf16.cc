// See linear_bf16.h.

#include "ops/cpu/linear_bf16.h"

#include <immintrin.h>

#include <cstring>

#include "ops/cast.h"
#include "ops/cpu/kernel_dispatch.h"
#include "ops/cpu/panels.h"

namespace llama::cpu {
namespace {

#define LLAMA_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma")))

// Panel lines (64 bytes of bf16 each) ahead that the tiles ask for, as
// linear.cc's decode tiles do.
constexpr int64_t kPrefetchLines = 48;

// kRows rows of x times kPanels panels. Per pair of panel lines (k, k + 1),
// unpacking interleaves them into (w[c][k], w[c][k + 1]) pairs, the operand
// vdpbf16ps wants; 16-bit unpacks work within 128-bit lanes, so `lo` holds
// the panel's rows {0-3, 8-11, 16-19, 24-27} and `hi` the others, put back
// in order at the end. One sum per (row, output): every row is summed the
// same way whatever the tile.
template <int kRows, int kPanels>
LLAMA_AVX512_BF16 inline void DotTile(const uint32_t* const* xs, const uint16_t* const* panels, int64_t in,
                                      float* const* ys, const int* columns) {
  __m512 lo[kRows][kPanels], hi[kRows][kPanels];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 2
    for (int p = 0; p < kPanels; ++p) lo[r][p] = hi[r][p] = _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < in; k += 2) {
    __m512bh wlo[kPanels], whi[kPanels];
#pragma GCC unroll 2
    for (int p = 0; p < kPanels; ++p) {
      const uint16_t* line = panels[p] + k * kPanelWidth;
      __builtin_prefetch(line + kPrefetchLines * kPanelWidth);
      __builtin_prefetch(line + (kPrefetchLines + 1) * kPanelWidth);
      const __m512i a = _mm512_loadu_si512(line), b = _mm512_loadu_si512(line + kPanelWidth);
      wlo[p] = reinterpret_cast<__m512bh>(_mm512_unpacklo_epi16(a, b));
      whi[p] = reinterpret_cast<__m512bh>(_mm512_unpackhi_epi16(a, b));
    }
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      const __m512bh xv = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(xs[r][k / 2])));
#pragma GCC unroll 2
      for (int p = 0; p < kPanels; ++p) {
        lo[r][p] = _mm512_dpbf16_ps(lo[r][p], wlo[p], xv);
        hi[r][p] = _mm512_dpbf16_ps(hi[r][p], whi[p], xv);
      }
    }
  }
  for (int r = 0; r < kRows; ++r) {
    for (int p = 0; p < kPanels; ++p) {
      float* y = ys[r * kPanels + p];
      if (y == nullptr) continue;
      float l[16], h[16], row[kPanelWidth];
      _mm512_storeu_ps(l, lo[r][p]);
      _mm512_storeu_ps(h, hi[r][p]);
      for (int i = 0; i < 16; ++i) {
        row[(i / 4) * 8 + i % 4] = l[i];
        row[(i / 4) * 8 + 4 + i % 4] = h[i];
      }
      std::memcpy(y, row, columns[p] * sizeof(float));
    }
  }
}

constexpr int kMaxTileRows = 8;

// DotTile in the shapes ForEachPanelTile and TileOfRows (panels.h) take.
struct DotTilePairs {
  template <int kRows>
  LLAMA_AVX512_BF16 static void Run(const uint32_t* const* xs, const uint16_t* const* panels, int64_t in,
                                    float* const* ys, const int* columns) {
    DotTile<kRows, 2>(xs, panels, in, ys, columns);
  }
};

struct DotTiles {
  static constexpr int kPairedRows = kBf16DotPairedRows;
  template <int kRows>
  LLAMA_AVX512_BF16 static void Run(const uint32_t* const* xs, const uint16_t* panel, int64_t in, float* const* ys,
                                    int columns) {
    const uint16_t* panels[1] = {panel};
    const int cols[1] = {columns};
    DotTile<kRows, 1>(xs, panels, in, ys, cols);
  }
  // Up to kPairedRows rows times two panels: for one row, four independent
  // sums hide vdpbf16ps's latency.
  LLAMA_AVX512_BF16 static void Pair(const uint32_t* const* xs, int rows, const uint16_t* const* panels, int64_t in,
                                     float* const* ys, const int* columns) {
    TileOfRows<DotTilePairs, kPairedRows>(rows, xs, panels, in, ys, columns);
  }
  // Rows [0, rows) of x (rows <= 8) times one panel: 16 sums in registers.
  LLAMA_AVX512_BF16 static void Rows(const uint32_t* const* xs, int rows, const uint16_t* panel, int64_t in,
                                     float* const* ys, int columns) {
    TileOfRows<DotTiles, kMaxTileRows>(rows, xs, panel, in, ys, columns);
  }
};

// The kernel is whether this CPU has the bf16 dot product.
KernelDispatch<bool, 2>& ChosenKernel() {
  static KernelDispatch<bool, 2> kernels({{{"avx512bf16", CpuRunsAvx512Bf16, true}, {"f32", AnyX86_64, false}}});
  return kernels;
}

}  // namespace

void RoundToBf16Pairs(const float* x, int64_t n, int64_t in, uint32_t* pairs) {
  for (int64_t i = 0; i < n * in; i += 2) {
    pairs[i / 2] = F32ToBf16(x[i]) | static_cast<uint32_t>(F32ToBf16(x[i + 1])) << 16;
  }
}

std::string_view Bf16DotKernel() { return ChosenKernel().name(); }

bool ForceBf16DotKernelForTesting(std::string_view name) { return ChosenKernel().ForceForTesting(name); }

LLAMA_AVX512_BF16 void Bf16DotPanels(const uint32_t* pairs, int64_t n, int64_t in, const Tensor& w, int64_t first,
                                     int64_t last, float* y) {
  // The walk of linear.cc's decode kernels, its tiles compiled here for
  // AVX-512 BF16.
  ForEachPanelTile<DotTiles, kMaxTileRows>(pairs, in / 2, n, in, static_cast<const uint16_t*>(w.raw()), first, last,
                                           w.dim(0), y);
}

}  // namespace llama::cpu
