#include "ops/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/cast.h"
#include "ops/cpu/cache_aligned.h"
#include "ops/cpu/simd.h"

namespace llama::cpu {
namespace {

using simd::Float8;
using simd::Load8;

// Widens n 16-bit cache values into `out`.
template <typename Half>
__attribute__((always_inline)) inline void Widen(const void* cache, int64_t offset, int64_t n, float* out) {
  const Half* bits = static_cast<const Half*>(cache) + offset;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) simd::Store8(out + i, Load8(bits + i));
  for (; i < n; ++i) out[i] = simd::Scalar(bits[i]);
}

// A cache row at element `offset` as f32: in place for an f32 cache, else
// widened into `scratch` (one head's row, or a block of them for the
// values: they stay in L1 while every query head of the group reads them). Bf16 and F16 are the element types that
// widen them: the generic ones, or in v3 code simd::Bf16Hw and F16Hw.
template <typename Bf16, typename F16>
__attribute__((always_inline)) inline const float* CacheRow(const void* cache, DType dtype, int64_t offset, int64_t n,
                                                            float* scratch) {
  if (dtype == DType::kF32) return static_cast<const float*>(cache) + offset;
  if (dtype == DType::kBF16) {
    Widen<Bf16>(cache, offset, n, scratch);
  } else {
    Widen<F16>(cache, offset, n, scratch);
  }
  return scratch;
}

// Dot j's row of one side: the row every dot shares, or its own.
__attribute__((always_inline)) inline const float* RowOf(const float* shared, int /*j*/) { return shared; }
__attribute__((always_inline)) inline const float* RowOf(const float* const* rows, int j) { return rows[j]; }

// dots[j] = RowOf(q, j) . RowOf(k, j) for kDots dots that share a key row
// (query heads, or query rows, that read it) or a query row (keys one head
// reads). Each dot is two chains of eight-wide sums (the plain loop is one
// serial chain of scalar FMAs, a quarter of the speed); several dots at
// once interleave their independent chains, hiding the adds' latency that
// one short dot (64 values: four steps) and its horizontal sum leave
// exposed, and the shared row is loaded once for all. Every dot is summed
// the same way whatever kDots is and whichever side is shared, so a row's
// scores do not depend on how its job grouped them.
template <int kDots, typename Q, typename K>
__attribute__((always_inline)) inline void Dots(Q q, K k, int64_t n, float* dots) {
  Float8 s0[kDots] = {}, s1[kDots] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
#pragma GCC unroll 4
    for (int j = 0; j < kDots; ++j) {
      s0[j] += Load8(RowOf(q, j) + i) * Load8(RowOf(k, j) + i);
      s1[j] += Load8(RowOf(q, j) + i + 8) * Load8(RowOf(k, j) + i + 8);
    }
  }
  for (; i + 8 <= n; i += 8) {
#pragma GCC unroll 4
    for (int j = 0; j < kDots; ++j) s0[j] += Load8(RowOf(q, j) + i) * Load8(RowOf(k, j) + i);
  }
  float sums[kDots];
  if constexpr (kDots == 4) {
    const Float8 four = simd::Sum4(s0[0] + s1[0], s0[1] + s1[1], s0[2] + s1[2], s0[3] + s1[3]);
    for (int j = 0; j < 4; ++j) sums[j] = four[j];
  } else {
    for (int j = 0; j < kDots; ++j) sums[j] = simd::Sum(s0[j] + s1[j]);
  }
#pragma GCC unroll 4
  for (int j = 0; j < kDots; ++j) {
    float sum = sums[j];
    for (int64_t m = i; m < n; ++m) sum += RowOf(q, j)[m] * RowOf(k, j)[m];
    dots[j] = sum;
  }
}
// Dots taken at once: for groups of fewer query heads (multi-head
// attention, decode's jobs of one head) four keys to a head, where one
// dot a key left its chain and horizontal sum exposed (a 512-token prefill
// of stories110M's shape spent as long in attention as in 73% of its
// linears).
constexpr int kDots = 4;

// Positions whose value rows are added to the output at once.
constexpr int kValueBlock = 8;
static_assert(kDots <= kValueBlock, "the keys widened for Dots share the value rows' scratch");

// y += w[0] x[0] + ... + w[count - 1] x[count - 1], added in that order, as
// one row at a time would: y is loaded and stored once per block of rows
// instead of once per row (with the rows' loads and stores it was a third
// of a long prompt's attention), and 64 outputs at a time keep eight
// independent sums in registers (one chain of dependent adds per output
// left the core waiting on their latency).
__attribute__((always_inline)) inline void AxpyRows(const float* w, const float* const* x, int count, int64_t n,
                                                    float* y) {
  constexpr int kChunks = 8;
  int64_t i = 0;
  for (; i + 8 * kChunks <= n; i += 8 * kChunks) {
    Float8 acc[kChunks];
#pragma GCC unroll 8
    for (int c = 0; c < kChunks; ++c) acc[c] = Load8(y + i + 8 * c);
    for (int j = 0; j < count; ++j) {
      const Float8 wv = w[j] - Float8{};
#pragma GCC unroll 8
      for (int c = 0; c < kChunks; ++c) acc[c] += wv * Load8(x[j] + i + 8 * c);
    }
#pragma GCC unroll 8
    for (int c = 0; c < kChunks; ++c) simd::Store8(y + i + 8 * c, acc[c]);
  }
  for (; i + 8 <= n; i += 8) {
    Float8 acc = Load8(y + i);
    for (int j = 0; j < count; ++j) acc += (w[j] - Float8{}) * Load8(x[j] + i);
    simd::Store8(y + i, acc);
  }
  for (; i < n; ++i) {
    for (int j = 0; j < count; ++j) y[i] += w[j] * x[j][i];
  }
}

// s[0, n) = softmax(s), eight at a time (a tail is padded with -inf, whose
// weight is 0): every row of the same length sums in the same order.
__attribute__((always_inline)) inline void Softmax(float* s, int64_t n) {
  Float8 max8 = Float8{} - __builtin_inff();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const Float8 v = Load8(s + i);
    max8 = v > max8 ? v : max8;
  }
  float tail[8];
  const int64_t rest = n - i;
  for (int j = 0; j < 8; ++j) tail[j] = j < rest ? s[i + j] : -__builtin_inff();
  const Float8 tail8 = Load8(tail);
  max8 = tail8 > max8 ? tail8 : max8;
  const float max_score = std::max(std::max(std::max(max8[0], max8[1]), std::max(max8[2], max8[3])),
                                   std::max(std::max(max8[4], max8[5]), std::max(max8[6], max8[7])));
  Float8 sum8 = {};
  for (i = 0; i + 8 <= n; i += 8) {
    const Float8 e = simd::Exp(Load8(s + i) - max_score);
    simd::Store8(s + i, e);
    sum8 += e;
  }
  const Float8 tail_e = simd::Exp(tail8 - max_score);
  sum8 += tail_e;
  const float inverse = 1.0f / simd::Sum(sum8);
  for (i = 0; i + 8 <= n; i += 8) simd::Store8(s + i, Load8(s + i) * inverse);
  for (int j = 0; j < rest; ++j) s[i + j] = tail_e[j] * inverse;
}

// Positions ahead whose cache rows are prefetched. One head's row is 64
// to 256 bytes, a cache row's worth of heads apart from the next
// position's: for a head at a time the hardware prefetchers do not follow
// that stride within a short sequence, and decode stalled on every row
// (nine tenths of the attention's time on the load of each key and value).
constexpr int64_t kPrefetchAhead = 8;

// Where KV head kv's row for position t starts in a cache, in elements.
__attribute__((always_inline)) inline int64_t HeadRowOffset(const AttentionArgs& a, int64_t kv, int64_t t) {
  return CacheRowOf(a.block_table, a.block_size, t) * a.n_kv_heads * a.head_dim + kv * a.head_dim;
}

// Asks for one head's row of a cache, `bytes` long, at element `offset`.
__attribute__((always_inline)) inline void PrefetchRow(const void* cache, DType dtype, int64_t offset, int64_t bytes) {
  const char* row = static_cast<const char*>(cache) + offset * static_cast<int64_t>(DTypeSize(dtype));
  for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(row + b);
}

// Query rows a prefill job takes at once (where a KV head has up to
// kRowBlockHeads query heads): each key and value row is then read from L2 (and
// widened) once for all of them, and a multi-head layer's dots go four rows
// to a key instead of one. stories110M's 512-token f16 prefill: attention
// had been 38% of the samples for ~5% of the multiply-adds.
constexpr int kRowBlock = 4;
constexpr int kRowBlockHeads = 16;

// Attention of query rows [row, row + rows) for the query heads
// heads[0, count), which all read KV head `kv`: each cached key and value
// row is loaded (and widened) once for the whole block. Pair p is row
// p / count's head heads[p % count]; its scores are scores[p * stride, ...),
// stride being the last row's positions. Every pair's scores, softmax and
// value sums are computed as for that row and head alone (Dots sums each
// dot the same way however grouped, AxpyRows takes the same blocks of
// positions), so the block changes no bit.
template <typename Bf16, typename F16>
__attribute__((always_inline)) inline void AttendGroupImpl(const AttentionArgs& a, int64_t row, int rows, int64_t kv,
                                                           const int* heads, int count, float* scores,
                                                           float* widened) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(a.head_dim));
  // Every row of the block sees the first row's positions; row i sees i more.
  const int64_t first_positions = a.start_pos + row + 1, stride = first_positions + rows - 1;
  const int pairs = rows * count;
  // Each pair's query and output rows (a group may hold every head).
  thread_local std::vector<const float*> q;
  thread_local std::vector<float*> out;
  q.resize(std::max<size_t>(q.size(), pairs));
  out.resize(std::max<size_t>(out.size(), pairs));
  for (int p = 0; p < pairs; ++p) {
    const int64_t offset = ((row + p / count) * a.n_heads + heads[p % count]) * a.head_dim;
    q[p] = a.q + offset;
    out[p] = a.out + offset;
  }
  // Only a single new position (decode) asks for rows ahead: there each
  // row comes from memory once. The rows of a prefill chunk read the cache
  // the rows before them just read, from L2, where asking cost a fifth of
  // a 512-token prefill's attention in prefetch instructions.
  const bool prefetch = a.len == 1;
  const int64_t row_bytes = a.head_dim * static_cast<int64_t>(DTypeSize(a.cache_dtype));
  // Not lambdas: GCC may leave one out of line, compiled for the baseline
  // target, and pass the v3 code's vectors to it in another ABI.
  for (int64_t t = 0; prefetch && t < std::min(kPrefetchAhead, stride); ++t) {
    PrefetchRow(a.k_cache, a.cache_dtype, HeadRowOffset(a, kv, t), row_bytes);
  }
  int64_t t = 0;
  if (pairs < kDots) {
    // kDots keys at a time for each pair (widened side by side), while
    // every pair sees them.
    for (; t + kDots <= first_positions; t += kDots) {
      const float* k[kDots];
      for (int j = 0; j < kDots; ++j) {
        if (prefetch && t + j + kPrefetchAhead < stride) {
          PrefetchRow(a.k_cache, a.cache_dtype, HeadRowOffset(a, kv, t + j + kPrefetchAhead), row_bytes);
        }
        k[j] = CacheRow<Bf16, F16>(a.k_cache, a.cache_dtype, HeadRowOffset(a, kv, t + j), a.head_dim,
                                   widened + j * a.head_dim);
      }
      for (int p = 0; p < pairs; ++p) {
        float dots[kDots];
        Dots<kDots>(q[p], k, a.head_dim, dots);
        for (int j = 0; j < kDots; ++j) scores[p * stride + t + j] = dots[j] * scale;
      }
    }
  }
  for (; t < stride; ++t) {
    if (prefetch && t + kPrefetchAhead < stride) {
      PrefetchRow(a.k_cache, a.cache_dtype, HeadRowOffset(a, kv, t + kPrefetchAhead), row_bytes);
    }
    const float* k = CacheRow<Bf16, F16>(a.k_cache, a.cache_dtype, HeadRowOffset(a, kv, t), a.head_dim, widened);
    // The rows that see position t: from the first whose positions pass t.
    int p = t < first_positions ? 0 : static_cast<int>(t - first_positions + 1) * count;
    for (; p + kDots <= pairs; p += kDots) {
      float dots[kDots];
      Dots<kDots>(q.data() + p, k, a.head_dim, dots);
      for (int h = 0; h < kDots; ++h) scores[(p + h) * stride + t] = dots[h] * scale;
    }
    for (; p < pairs; ++p) {
      float dot;
      Dots<1>(q.data() + p, k, a.head_dim, &dot);
      scores[p * stride + t] = dot * scale;
    }
  }
  for (int p = 0; p < pairs; ++p) {
    Softmax(scores + p * stride, first_positions + p / count);
    std::fill_n(out[p], a.head_dim, 0.0f);
  }
  for (int64_t t = 0; prefetch && t < std::min(kPrefetchAhead, stride); ++t) {
    PrefetchRow(a.v_cache, a.cache_dtype, HeadRowOffset(a, kv, t), row_bytes);
  }
  for (int64_t t = 0; t < stride; t += kValueBlock) {
    for (int64_t u = t + kPrefetchAhead; prefetch && u < std::min(t + kPrefetchAhead + kValueBlock, stride); ++u) {
      PrefetchRow(a.v_cache, a.cache_dtype, HeadRowOffset(a, kv, u), row_bytes);
    }
    const int block = static_cast<int>(std::min<int64_t>(kValueBlock, stride - t));
    const float* v[kValueBlock];
    for (int j = 0; j < block; ++j) {
      v[j] = CacheRow<Bf16, F16>(a.v_cache, a.cache_dtype, HeadRowOffset(a, kv, t + j), a.head_dim,
                                 widened + j * a.head_dim);
    }
    for (int p = 0; p < pairs; ++p) {
      // The positions of this block the pair's row sees (as it alone would).
      const int64_t seen = std::min<int64_t>(kValueBlock, first_positions + p / count - t);
      if (seen > 0) AxpyRows(scores + p * stride + t, v, static_cast<int>(seen), a.head_dim, out[p]);
    }
  }
}

// Not LLAMA_DISPATCH_V3: the two versions widen 16-bit caches differently
// (the v3 one with instructions the baseline cannot contain).
LLAMA_V3
void AttendGroupV3(const AttentionArgs& a, int64_t row, int rows, int64_t kv, const int* heads, int count,
                   float* scores, float* widened) {
  AttendGroupImpl<simd::Bf16Hw, simd::F16Hw>(a, row, rows, kv, heads, count, scores, widened);
}

void AttendGroupBaseline(const AttentionArgs& a, int64_t row, int rows, int64_t kv, const int* heads, int count,
                         float* scores, float* widened) {
  AttendGroupImpl<uint16_t, simd::F16>(a, row, rows, kv, heads, count, scores, widened);
}

void AttendGroup(const AttentionArgs& a, int64_t row, int rows, int64_t kv, const int* heads, int count,
                 float* scores, float* widened) {
  if (simd::UseV3()) return AttendGroupV3(a, row, rows, kv, heads, count, scores, widened);
  AttendGroupBaseline(a, row, rows, kv, heads, count, scores, widened);
}

}  // namespace

void Attention(const AttentionArgs& a, ThreadPool& pool) {
  // The query heads of each KV head, in order.
  std::vector<std::vector<int>> groups(a.n_kv_heads);
  size_t group_size = 0;
  for (int64_t h = 0; h < a.n_heads; ++h) groups[a.kv_head_of[h]].push_back(static_cast<int>(h));
  for (const std::vector<int>& heads : groups) group_size = std::max(group_size, heads.size());
  // A job per (block of rows, KV head) when that keeps every thread busy
  // (prefill, batches); else per (row, query head), so that decoding one
  // row with few KV heads still uses every thread.
  const bool by_group = a.len * a.n_kv_heads >= 4 * static_cast<int64_t>(pool.size());
  const int64_t block = by_group && group_size <= static_cast<size_t>(kRowBlockHeads) ? kRowBlock : 1;
  const int64_t blocks = (a.len + block - 1) / block;
  const int64_t jobs = by_group ? blocks * a.n_kv_heads : a.len * a.n_heads;
  pool.ParallelFor(jobs, 1, [&](int64_t begin, int64_t end) {
    // Grown to the longest context (and head size) once per thread, then reused.
    thread_local CacheAlignedVector<float> scores, widened;
    if (static_cast<int64_t>(widened.size()) < kValueBlock * a.head_dim) widened.resize(kValueBlock * a.head_dim);
    for (int64_t job = begin; job < end; ++job) {
      if (by_group) {
        const int64_t row = job / a.n_kv_heads * block, kv = job % a.n_kv_heads;
        const int rows = static_cast<int>(std::min(block, a.len - row));
        const std::vector<int>& heads = groups[kv];
        if (heads.empty()) continue;
        const int64_t needed = (a.start_pos + row + rows) * rows * static_cast<int64_t>(heads.size());
        if (static_cast<int64_t>(scores.size()) < needed) scores.resize(needed);
        AttendGroup(a, row, rows, kv, heads.data(), static_cast<int>(heads.size()), scores.data(), widened.data());
      } else {
        const int64_t row = job / a.n_heads;
        const int head = static_cast<int>(job % a.n_heads);
        const int64_t positions = a.start_pos + row + 1;
        if (static_cast<int64_t>(scores.size()) < positions) scores.resize(positions);
        AttendGroup(a, row, 1, a.kv_head_of[head], &head, 1, scores.data(), widened.data());
      }
    }
  });
}

}  // namespace llama::cpu
