// The packed layout of 16- and 32-bit linear weights (PackLinearWeight):
// panels of kPanelWidth output rows, each [in][kPanelWidth]; and the walk of
// the decode kernels over it (linear.cc's, linear_bf16.cc's). Internal to
// ops/cpu.

#ifndef LLAMA_OPS_CPU_PANELS_H_
#define LLAMA_OPS_CPU_PANELS_H_

#include <algorithm>
#include <cstdint>

namespace llama::cpu {

inline constexpr int kPanelWidth = 32;

// The output rows panel p holds of a weight with `out` rows.
inline int PanelColumns(int64_t out, int64_t p) {
  return static_cast<int>(std::min<int64_t>(kPanelWidth, out - p * kPanelWidth));
}

// Tile::template Run<kRows>(args...) with kRows == rows, for 1 <= rows <=
// kMaxRows: the row count made a compile-time constant, so that every sum of
// the tile stays in a register.
//
// This and ForEachPanelTile are always inlined, so that a kernel's tiles are
// compiled for the instruction set of the function they end up in; Tile and
// Tiles are types with static members, not lambdas, since a lambda does not
// take on its enclosing function's target.
template <typename Tile, int kMaxRows, typename... Args>
__attribute__((always_inline)) inline void TileOfRows(int rows, Args... args) {
  if constexpr (kMaxRows > 1) {
    if (rows < kMaxRows) return TileOfRows<Tile, kMaxRows - 1>(rows, args...);
  }
  Tile::template Run<kMaxRows>(args...);
}

// Output panels a task of the decode kernels takes at once for n rows of
// x: two where ForEachPanelTile reads panels in pairs (n <= paired_rows), so
// that tasks split on pairs.
inline int64_t PanelsPerTask(int64_t n, int paired_rows) { return n <= paired_rows ? 2 : 1; }

// y rows [0, n) for output panels [first, last) of `packed` ([in] deep), x's
// rows x_stride elements apart. Up to Tiles::kPairedRows rows of x take two
// panels at once (Tiles::Pair): two weight streams in flight per thread,
// and for one row twice the independent sums, to hide the multiply-add
// latency. More rows go in tiles of up to kMaxRows rows of one panel
// (Tiles::Rows), each tile reading the panel once.
template <typename Tiles, int kMaxRows, typename X, typename Weight>
__attribute__((always_inline)) inline void ForEachPanelTile(const X* x, int64_t x_stride, int64_t n, int64_t in,
                                                            const Weight* packed, int64_t first, int64_t last,
                                                            int64_t out, float* y) {
  const auto panel = [&](int64_t p) { return packed + p * in * kPanelWidth; };
  if (n <= Tiles::kPairedRows) {
    const X* xs[Tiles::kPairedRows] = {};
    for (int r = 0; r < n; ++r) xs[r] = x + r * x_stride;
    for (int64_t p = first; p < last; p += 2) {
      const int64_t q = std::min(p + 1, last - 1);  // An odd last panel pairs with itself.
      const Weight* panels[2] = {panel(p), panel(q)};
      float* ys[2 * Tiles::kPairedRows] = {};
      for (int r = 0; r < n; ++r) {
        ys[2 * r] = y + r * out + p * kPanelWidth;
        ys[2 * r + 1] = q != p ? y + r * out + q * kPanelWidth : nullptr;
      }
      const int cols[2] = {PanelColumns(out, p), PanelColumns(out, q)};
      Tiles::Pair(xs, static_cast<int>(n), panels, in, ys, cols);
    }
    return;
  }
  for (int64_t p = first; p < last; ++p) {
    for (int64_t i = 0; i < n; i += kMaxRows) {
      const int rows = static_cast<int>(std::min<int64_t>(kMaxRows, n - i));
      const X* xs[kMaxRows];
      float* ys[kMaxRows];
      for (int r = 0; r < rows; ++r) {
        xs[r] = x + (i + r) * x_stride;
        ys[r] = y + (i + r) * out + p * kPanelWidth;
      }
      Tiles::Rows(xs, rows, panel(p), in, ys, PanelColumns(out, p));
    }
  }
}

}  // namespace llama::cpu

#endif  // LLAMA_OPS_CPU_PANELS_H_
