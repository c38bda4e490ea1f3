#include "ops/cpu/attention.h"

#include <cmath>
#include <vector>

#include "ops/cast.h"

namespace llama::cpu {
namespace {

// The n elements of a cache at element `offset`, as f32: in place for an
// f32 cache, else widened into `scratch` (one head's row, so it stays in L1).
const float* CacheRow(const void* cache, DType dtype, int64_t offset, int64_t n, float* scratch) {
  if (dtype == DType::kF32) return static_cast<const float*>(cache) + offset;
  const uint16_t* bits = static_cast<const uint16_t*>(cache) + offset;
  if (dtype == DType::kBF16) {
    for (int64_t i = 0; i < n; ++i) scratch[i] = Bf16ToF32(bits[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) scratch[i] = F16ToF32(bits[i]);
  }
  return scratch;
}

}  // namespace

void Attention(const AttentionArgs& a, ThreadPool& pool) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(a.head_dim));
  const int64_t kv_stride = a.n_kv_heads * a.head_dim;
  pool.ParallelFor(a.len * a.n_heads, 1, [&](int64_t begin, int64_t end) {
    // Grow to the longest context (and head size) once per thread, then are reused.
    thread_local std::vector<float> scores, widened;
    if (static_cast<int64_t>(widened.size()) < a.head_dim) widened.resize(a.head_dim);
    for (int64_t job = begin; job < end; ++job) {
      const int64_t row = job / a.n_heads, head = job % a.n_heads;
      const int64_t pos = a.start_pos + row;
      const float* q = a.q + (row * a.n_heads + head) * a.head_dim;
      const int64_t kv = a.kv_head_of[head];
      if (static_cast<int64_t>(scores.size()) < pos + 1) scores.resize(pos + 1);
      float max_score = -INFINITY;
      const auto row_of = [&](const void* cache, int64_t t) {
        return CacheRow(cache, a.cache_dtype, t * kv_stride + kv * a.head_dim, a.head_dim, widened.data());
      };
      for (int64_t t = 0; t <= pos; ++t) {
        const float* k = row_of(a.k_cache, t);
        float dot = 0.0f;
        for (int64_t d = 0; d < a.head_dim; ++d) dot += q[d] * k[d];
        scores[t] = dot * scale;
        max_score = std::max(max_score, scores[t]);
      }
      float sum = 0.0f;
      for (int64_t t = 0; t <= pos; ++t) {
        scores[t] = std::exp(scores[t] - max_score);
        sum += scores[t];
      }
      const float inverse = 1.0f / sum;
      float* out = a.out + (row * a.n_heads + head) * a.head_dim;
      for (int64_t d = 0; d < a.head_dim; ++d) out[d] = 0.0f;
      for (int64_t t = 0; t <= pos; ++t) {
        const float* v = row_of(a.v_cache, t);
        const float weight = scores[t] * inverse;
        for (int64_t d = 0; d < a.head_dim; ++d) out[d] += weight * v[d];
      }
    }
  });
}

}  // namespace llama::cpu
