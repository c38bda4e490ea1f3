#include "ops/cpu/linear.h"

#include <algorithm>
#include <vector>

#include "ops/cpu/elementwise.h"

namespace llama::cpu {
namespace {

// Eight partial sums so the compiler can vectorise without -ffast-math.
float Dot(const float* a, const float* b, int64_t n) {
  float s[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) s[k] += a[i + k] * b[i + k];
  }
  float sum = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
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
      for (int64_t i = 0; i < n; ++i) {
        const float* xi = x + i * in;
        float* yi = y + i * out + first;
        for (int64_t r = 0; r < count; ++r) yi[r] = Dot(xi, block + r * in, in);
      }
    }
  });
}

}  // namespace llama::cpu
