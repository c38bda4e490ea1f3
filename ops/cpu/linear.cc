#include "ops/cpu/linear.h"

#include <algorithm>
#include <vector>

#include "ops/cpu/elementwise.h"

namespace llama::cpu {
namespace {

// The inner kernels are compiled twice (GCC function multiversioning): for
// AVX2+FMA and for baseline x86-64, chosen once at load time by the CPU, so
// the binary still runs on any x86-64 while using 8-wide FMAs where it can.
#define LLAMA_MULTIVERSION __attribute__((target_clones("arch=haswell", "default")))

// Dot products of kRows rows of x with one weight row, eight partial sums
// per row so the loop vectorises without -ffast-math; the weight row is
// loaded once for all rows.
template <int kRows>
__attribute__((always_inline)) inline void DotRowsImpl(const float* const* x, const float* w, int64_t n, float* out) {
  float s[kRows][8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int r = 0; r < kRows; ++r) {
      for (int k = 0; k < 8; ++k) s[r][k] += x[r][i + k] * w[i + k];
    }
  }
  for (int r = 0; r < kRows; ++r) {
    float sum = ((s[r][0] + s[r][1]) + (s[r][2] + s[r][3])) + ((s[r][4] + s[r][5]) + (s[r][6] + s[r][7]));
    for (int64_t j = i; j < n; ++j) sum += x[r][j] * w[j];
    out[r] = sum;
  }
}

LLAMA_MULTIVERSION
void DotRows(const float* const* x, int rows, const float* w, int64_t n, float* out) {
  switch (rows) {
    case 4:
      return DotRowsImpl<4>(x, w, n, out);
    case 3:
      return DotRowsImpl<3>(x, w, n, out);
    case 2:
      return DotRowsImpl<2>(x, w, n, out);
    default:
      return DotRowsImpl<1>(x, w, n, out);
  }
}

// Weight rows upcast at a time: 32 rows x 8192 floats = 1 MiB, within L2.
constexpr int64_t kRowBlock = 32;

}  // namespace

void Linear(const float* x, int64_t n, const Tensor& w, float* y, ThreadPool& pool) {
  const int64_t out = w.dim(0), in = w.dim(1);
  const int64_t blocks = (out + kRowBlock - 1) / kRowBlock;
  pool.ParallelFor(blocks, 1, [&](int64_t begin, int64_t end) {
    // Per thread, sized once: no allocation per call.
    thread_local std::vector<float> rows;
    const float* block = nullptr;
    for (int64_t b = begin; b < end; ++b) {
      const int64_t first = b * kRowBlock, count = std::min(kRowBlock, out - first);
      if (w.dtype() == DType::kF32) {
        block = w.f32() + first * in;
      } else {
        if (static_cast<int64_t>(rows.size()) < kRowBlock * in) rows.resize(kRowBlock * in);
        LoadRow(w, first * in, count * in, rows.data());
        block = rows.data();
      }
      for (int64_t i = 0; i < n; i += 4) {
        const int rows = static_cast<int>(std::min<int64_t>(4, n - i));
        const float* xs[4] = {x + i * in, x + std::min(i + 1, n - 1) * in, x + std::min(i + 2, n - 1) * in,
                              x + std::min(i + 3, n - 1) * in};
        for (int64_t r = 0; r < count; ++r) {
          float dots[4];
          DotRows(xs, rows, block + r * in, in, dots);
          for (int k = 0; k < rows; ++k) y[(i + k) * out + first + r] = dots[k];
        }
      }
    }
  });
}

}  // namespace llama::cpu
