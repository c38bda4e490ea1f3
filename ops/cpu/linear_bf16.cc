// See linear_bf16.h.

#include "ops/cpu/linear_bf16.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "ops/cast.h"
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

// Rows [0, rows) of x (rows <= 8) times one panel: 16 sums in registers.
LLAMA_AVX512_BF16 void DotRows(const uint32_t* const* xs, int rows, const uint16_t* panel, int64_t in,
                               float* const* ys, int columns) {
  const uint16_t* panels[1] = {panel};
  const int cols[1] = {columns};
  switch (rows) {
    case 8:
      return DotTile<8, 1>(xs, panels, in, ys, cols);
    case 7:
      return DotTile<7, 1>(xs, panels, in, ys, cols);
    case 6:
      return DotTile<6, 1>(xs, panels, in, ys, cols);
    case 5:
      return DotTile<5, 1>(xs, panels, in, ys, cols);
    case 4:
      return DotTile<4, 1>(xs, panels, in, ys, cols);
    case 3:
      return DotTile<3, 1>(xs, panels, in, ys, cols);
    case 2:
      return DotTile<2, 1>(xs, panels, in, ys, cols);
    default:
      return DotTile<1, 1>(xs, panels, in, ys, cols);
  }
}

constexpr int kMaxTileRows = 8;

struct Bf16DotChoice {
  std::string_view name;
  bool (*runs)();
};

bool HasAvx512Bf16() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
}
bool Always() { return true; }

const Bf16DotChoice kBf16DotKernels[] = {{"avx512bf16", HasAvx512Bf16}, {"f32", Always}};

std::atomic<const Bf16DotChoice*>& ChosenKernel() {
  static std::atomic<const Bf16DotChoice*> chosen = [] {
    for (const Bf16DotChoice& k : kBf16DotKernels) {
      if (k.runs()) return &k;
    }
    return &kBf16DotKernels[1];
  }();
  return chosen;
}

}  // namespace

void RoundToBf16Pairs(const float* x, int64_t n, int64_t in, uint32_t* pairs) {
  for (int64_t i = 0; i < n * in; i += 2) {
    pairs[i / 2] = F32ToBf16(x[i]) | static_cast<uint32_t>(F32ToBf16(x[i + 1])) << 16;
  }
}

std::string_view Bf16DotKernel() { return ChosenKernel().load()->name; }

bool ForceBf16DotKernelForTesting(std::string_view name) {
  for (const Bf16DotChoice& k : kBf16DotKernels) {
    if (k.name == name && k.runs()) {
      ChosenKernel().store(&k);
      return true;
    }
  }
  return false;
}

LLAMA_AVX512_BF16 void Bf16DotPanels(const uint32_t* pairs, int64_t n, int64_t in, const Tensor& w, int64_t first,
                                     int64_t last, float* y) {
  const int64_t out = w.dim(0), half = in / 2;
  const uint16_t* packed = static_cast<const uint16_t*>(w.raw());
  const auto panel = [&](int64_t p) { return packed + p * in * kPanelWidth; };
  // The walk of PackedTimesXImpl (linear.cc), written again: its tiles are
  // inlined into target-specific code, which a shared walk taking lambdas
  // would not be (lambdas do not inherit a function's target).
  if (n == 1) {
    // Two panels at once: four independent sums hide vdpbf16ps's latency.
    const uint32_t* xs[1] = {pairs};
    for (int64_t p = first; p < last; p += 2) {
      const int64_t q = std::min(p + 1, last - 1);  // An odd last panel pairs with itself.
      const uint16_t* panels[2] = {panel(p), panel(q)};
      float* ys[2] = {y + p * kPanelWidth, q != p ? y + q * kPanelWidth : nullptr};
      const int cols[2] = {PanelColumns(out, p), PanelColumns(out, q)};
      DotTile<1, 2>(xs, panels, in, ys, cols);
    }
    return;
  }
  for (int64_t p = first; p < last; ++p) {
    for (int64_t i = 0; i < n; i += kMaxTileRows) {
      const int rows = static_cast<int>(std::min<int64_t>(kMaxTileRows, n - i));
      const uint32_t* xs[kMaxTileRows];
      float* ys[kMaxTileRows];
      for (int r = 0; r < rows; ++r) {
        xs[r] = pairs + (i + r) * half;
        ys[r] = y + (i + r) * out + p * kPanelWidth;
      }
      DotRows(xs, rows, panel(p), in, ys, PanelColumns(out, p));
    }
  }
}

}  // namespace llama::cpu
