#include "ops/cpu/linear.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/cast.h"
#include "ops/cpu/elementwise.h"

namespace llama::cpu {
namespace {

// The inner kernels are compiled twice (GCC function multiversioning): for
// AVX2+FMA and for baseline x86-64, chosen once at load time by the CPU, so
// the binary still runs on any x86-64 while using 8-wide FMAs where it can.
#define LLAMA_MULTIVERSION __attribute__((target_clones("arch=x86-64-v3", "default")))

// Eight floats in one vector (GCC vector extension): a ymm register on
// AVX2, two xmm registers on baseline x86-64. Its helpers are always
// inlined, so the ABI note GCC gives for passing it by value does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float Float8 __attribute__((vector_size(32)));

typedef uint16_t Uint16x8 __attribute__((vector_size(16)));
typedef uint32_t Uint32x8 __attribute__((vector_size(32)));

__attribute__((always_inline)) inline Float8 Load8(const float* p) {
  Float8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Eight bf16 weights widened to f32 in registers (bf16 is the top half of
// an f32), so decode reads each weight once, at two bytes.
__attribute__((always_inline)) inline Float8 Load8(const uint16_t* p) {
  Uint16x8 half;
  std::memcpy(&half, p, sizeof half);
  const Uint32x8 wide = __builtin_convertvector(half, Uint32x8) << 16;
  Float8 v;
  std::memcpy(&v, &wide, sizeof v);
  return v;
}

__attribute__((always_inline)) inline float Scalar(float v) { return v; }
__attribute__((always_inline)) inline float Scalar(uint16_t v) { return Bf16ToF32(v); }

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
      const Float8& p = s[r][c];
      float sum = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
      for (int64_t j = i; j < n; ++j) sum += x[r][j] * Scalar(w[c][j]);
      out[r * kCols + c] = sum;
    }
  }
}

// out[r][c] = dot(x[r], w[c]) for `rows` (1..4) rows and `cols` (1..2)
// weight rows of f32 or bf16.
template <typename Weight>
__attribute__((always_inline)) inline void DotRowsImpl(const float* const* x, int rows, const Weight* const* w,
                                                       int cols, int64_t n, float* out) {
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

LLAMA_MULTIVERSION
void DotRows(const float* const* x, int rows, const float* const* w, int cols, int64_t n, float* out) {
  DotRowsImpl(x, rows, w, cols, n, out);
}

LLAMA_MULTIVERSION
void DotRows(const float* const* x, int rows, const uint16_t* const* w, int cols, int64_t n, float* out) {
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
    for (int64_t r = 0; r < count; r += 2) {
      const int cols = static_cast<int>(std::min<int64_t>(2, count - r));
      const Weight* ws[2] = {block + r * in, block + std::min(r + 1, count - 1) * in};
      float dots[8];
      DotRows(xs, tile_rows, ws, cols, in, dots);
      for (int k = 0; k < tile_rows; ++k) {
        for (int c = 0; c < cols; ++c) y[(i + k) * out + first + r + c] = dots[k * cols + c];
      }
    }
  }
}

// Weight rows upcast at a time: 32 rows x 8192 floats = 1 MiB, within L2.
constexpr int64_t kRowBlock = 32;

}  // namespace

void Linear(const float* x, int64_t n, const Tensor& w, float* y, ThreadPool& pool) {
  const int64_t out = w.dim(0), in = w.dim(1);
  const int64_t blocks = (out + kRowBlock - 1) / kRowBlock;
  // Few activation rows (decode, up to batch 16): bf16 weights are widened
  // in registers as they stream by. Many (prefill): a block is widened once
  // into a buffer and reused for every row.
  const bool stream_bf16 = w.dtype() == DType::kBF16 && n <= 16;
  pool.ParallelFor(blocks, 1, [&](int64_t begin, int64_t end) {
    // Per thread, sized once: no allocation per call.
    thread_local std::vector<float> widened;
    for (int64_t b = begin; b < end; ++b) {
      const int64_t first = b * kRowBlock, count = std::min(kRowBlock, out - first);
      if (w.dtype() == DType::kF32) {
        BlockTimesX(x, n, w.f32() + first * in, count, in, out, first, y);
      } else if (stream_bf16) {
        BlockTimesX(x, n, static_cast<const uint16_t*>(w.raw()) + first * in, count, in, out, first, y);
      } else {
        if (static_cast<int64_t>(widened.size()) < kRowBlock * in) widened.resize(kRowBlock * in);
        LoadRow(w, first * in, count * in, widened.data());
        BlockTimesX(x, n, widened.data(), count, in, out, first, y);
      }
    }
  });
}

}  // namespace llama::cpu
