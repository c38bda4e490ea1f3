// Each CPU kernel against a plain scalar version written here, on random
// inputs. Tolerance: |a - b| <= 1e-5 + 1e-5 |b| (f32 with a different
// summation order over at most a few thousand terms).

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "ops/cast.h"
#include "ops/cpu/attention.h"
#include "ops/cpu/elementwise.h"
#include "ops/cpu/linear.h"
#include "ops/cpu/simd.h"
#include "ops/cpu/thread_pool.h"
#include "ops/random_values.h"
#include "ops/rope_table.h"

namespace llama::cpu {
namespace {

using ::llama::testing::Random;

void ExpectClose(const std::vector<float>& actual, const std::vector<float>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    ASSERT_NEAR(actual[i], expected[i], 1e-5 + 1e-5 * std::abs(expected[i])) << "index " << i;
  }
}

// Runs `check` with each version of the kernels this CPU runs (baseline
// always, x86-64-v3 where it can), and says which ran.
template <typename Check>
void ForEveryKernelVersion(const char* what, Check&& check) {
  const bool v3_by_default = simd::UseV3();
  std::string ran;
  for (bool v3 : {false, true}) {
    if (!simd::ForceV3ForTesting(v3)) continue;
    SCOPED_TRACE(simd::KernelVersion());
    absl::StrAppend(&ran, ran.empty() ? "" : ", ", simd::KernelVersion());
    check();
  }
  ASSERT_TRUE(simd::ForceV3ForTesting(v3_by_default));
  std::printf("%s: kernel versions run: %s\n", what, ran.c_str());
}

// Linear against a double-precision scalar product for n rows of x, every
// weight dtype (packed); sizes that are not multiples of any tile, panel or
// vector (out = 70 and 71: a partial last panel, an odd panel count).
void ExpectLinearMatchesScalar(int64_t n, int64_t out = 70) {
  ThreadPool pool(3);
  const int64_t in = 67;
  const std::vector<float> x = Random(n * in, 1), w = Random(out * in, 2);
  std::vector<uint16_t> w16(w.size()), wb16(w.size());
  std::vector<float> w16f(w.size()), wb16f(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    w16[i] = F32ToF16(w[i]);
    wb16[i] = F32ToBf16(w[i]);
    w16f[i] = F16ToF32(w16[i]);
    wb16f[i] = Bf16ToF32(wb16[i]);
  }
  struct Case {
    Tensor weight;
    const std::vector<float>* values;
  };
  for (const Case& c : {Case{Tensor::View(DType::kF32, {out, in}, w.data()), &w},
                        Case{Tensor::View(DType::kF16, {out, in}, w16.data()), &w16f},
                        Case{Tensor::View(DType::kBF16, {out, in}, wb16.data()), &wb16f}}) {
    std::vector<float> y(n * out), expected(n * out);
    absl::StatusOr<Tensor> packed = PackLinearWeight(c.weight, pool);
    ASSERT_TRUE(packed.ok()) << packed.status();
    ASSERT_TRUE(Linear(x.data(), n, *packed, y.data(), pool).ok());
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t o = 0; o < out; ++o) {
        double sum = 0;
        for (int64_t k = 0; k < in; ++k) sum += double(x[i * in + k]) * (*c.values)[o * in + k];
        expected[i * out + o] = static_cast<float>(sum);
      }
    }
    SCOPED_TRACE(absl::StrCat("n ", n, ", ", DTypeName(c.weight.dtype()), " weights"));
    ExpectClose(y, expected);
  }
}

class LinearTest : public ::testing::TestWithParam<int64_t> {};

// n <= 3 takes the decode kernel (panels widened in registers: pairs of
// panels for one row, one panel for 2 and 3), more the prefill path (f32
// panels in register tiles of 3 or 8 rows); each with both kernel versions.
TEST_P(LinearTest, MatchesScalarForEveryDtype) {
  ForEveryKernelVersion("linear", [&] {
    ExpectLinearMatchesScalar(GetParam());
    ExpectLinearMatchesScalar(GetParam(), /*out=*/71);
  });
}

// Every prefill kernel this CPU can run (AVX-512, AVX2, baseline), not only
// the one it picks.
TEST(LinearKernelsTest, EveryPrefillKernelMatchesScalar) {
  const std::string chosen(PrefillKernel());
  int tried = 0;
  for (const char* kernel : {"avx512", "avx2", "baseline"}) {
    if (!ForcePrefillKernelForTesting(kernel)) continue;
    ++tried;
    SCOPED_TRACE(kernel);
    for (int64_t n : {17, 24, 100}) ExpectLinearMatchesScalar(n);
  }
  ASSERT_TRUE(ForcePrefillKernelForTesting(chosen));
  // Every kernel the CPU runs was tried, not only the baseline.
  EXPECT_EQ(tried, 1 + (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) +
                       (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")));
  std::printf("prefill kernels run: %d (chosen by default: %s)\n", tried, chosen.c_str());
  EXPECT_FALSE(ForcePrefillKernelForTesting("sse9"));
}

INSTANTIATE_TEST_SUITE_P(Rows, LinearTest, ::testing::Values(1, 2, 3, 4, 5, 6, 9, 10, 12, 13, 17, 32, 33));

// A row's outputs do not depend on the rows computed with it: every row of
// a 40-row product (f32 panels), computed alone and in batches of 2 to 33
// rows (every decode and prefill tile shape: 6 / 7 rows on either side of
// the AVX-512 tiles' panel pairs, one and several decode tiles, and 32 / 33
// rows on either side of the AVX-512 decode limit), equals the 40-row
// result bit for bit; for every weight dtype, every prefill kernel this CPU runs (the
// decode kernel follows it) and both widening versions.
TEST(LinearKernelsTest, RowsDoNotDependOnTheirBatch) {
  const std::string chosen(PrefillKernel());
  ThreadPool pool(3);
  const int64_t in = 67, out = 71, rows = 40;
  const std::vector<float> x = Random(rows * in, 5), w = Random(out * in, 6);
  std::vector<uint16_t> w16(w.size()), wb16(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    w16[i] = F32ToF16(w[i]);
    wb16[i] = F32ToBf16(w[i]);
  }
  std::string ran;
  for (const char* kernel : {"avx512", "avx2", "baseline"}) {
    if (!ForcePrefillKernelForTesting(kernel)) continue;
    absl::StrAppend(&ran, kernel, " ");
    ForEveryKernelVersion("linear batch invariance", [&] {
      for (const Tensor& weight : {Tensor::View(DType::kF32, {out, in}, w.data()),
                                   Tensor::View(DType::kF16, {out, in}, w16.data()),
                                   Tensor::View(DType::kBF16, {out, in}, wb16.data())}) {
        SCOPED_TRACE(absl::StrCat(kernel, ", ", DTypeName(weight.dtype())));
        absl::StatusOr<Tensor> packed = PackLinearWeight(weight, pool);
        ASSERT_TRUE(packed.ok()) << packed.status();
        std::vector<float> all(rows * out);
        ASSERT_TRUE(Linear(x.data(), rows, *packed, all.data(), pool).ok());
        for (int64_t n : {1, 2, 3, 5, 6, 7, 9, 13, 17, 32, 33}) {
          for (int64_t first = 0; first + n <= rows; first += n) {
            std::vector<float> some(n * out);
            ASSERT_TRUE(Linear(x.data() + first * in, n, *packed, some.data(), pool).ok());
            for (int64_t i = 0; i < n * out; ++i) {
              ASSERT_EQ(some[i], all[first * out + i]) << "rows [" << first << ", " << first + n << ") @" << i;
            }
          }
        }
      }
    });
  }
  ASSERT_TRUE(ForcePrefillKernelForTesting(chosen));
  std::printf("batch invariance checked with prefill kernels: %s\n", ran.c_str());
}

TEST(LinearKernelsTest, RowMajorWeightsAreRefused) {
  ThreadPool pool(1);
  const std::vector<float> w(4 * 8), x(8);
  std::vector<float> y(4);
  EXPECT_EQ(Linear(x.data(), 1, Tensor::View(DType::kF32, {4, 8}, w.data()), y.data(), pool).message(),
            "Linear: the f32[4, 8] weight is row-major; pack it once with PackLinearWeight");
  EXPECT_EQ(PackLinearWeight(Tensor::View(DType::kF32, {32}, w.data()), pool).status().message(),
            "PackLinearWeight: f32[32] is not a linear layer's weight (expected a 2-D f32, bf16, f16, q8_0, q4_k or q6_k tensor)");
}

TEST(KernelsTest, RmsNorm) {
  const int64_t n = 3, dim = 33;
  const std::vector<float> x = Random(n * dim, 3), w = Random(dim, 4);
  std::vector<float> out(n * dim), expected(n * dim);
  RmsNorm(x.data(), Tensor::View(DType::kF32, {dim}, w.data()), n, dim, 1e-5f, out.data());
  for (int64_t r = 0; r < n; ++r) {
    double ms = 0;
    for (int64_t i = 0; i < dim; ++i) ms += double(x[r * dim + i]) * x[r * dim + i];
    const double scale = 1.0 / std::sqrt(ms / dim + 1e-5);
    for (int64_t i = 0; i < dim; ++i) expected[r * dim + i] = static_cast<float>(x[r * dim + i] * scale * w[i]);
  }
  ExpectClose(out, expected);
}

TEST(KernelsTest, RopeRotatesPairs) {
  const int64_t hd = 8, heads = 2;
  RopeTable table(hd, 64, 10000.0);
  std::vector<float> x = Random(heads * hd, 5), expected = x;
  table.Apply(x.data(), heads, 37);
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < hd / 2; ++i) {
      const double angle = 37.0 * std::pow(10000.0, -2.0 * i / hd);
      const double re = expected[h * hd + 2 * i], im = expected[h * hd + 2 * i + 1];
      expected[h * hd + 2 * i] = static_cast<float>(re * std::cos(angle) - im * std::sin(angle));
      expected[h * hd + 2 * i + 1] = static_cast<float>(re * std::sin(angle) + im * std::cos(angle));
    }
  }
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], expected[i], 1e-4) << i;
  std::vector<float> y = Random(hd, 6), y0 = y;
  table.Apply(y.data(), 1, 0);  // Position 0 is the identity.
  EXPECT_EQ(y, y0);
}

// A 16-bit cache is read as its values widened to f32: the same arithmetic
// as an f32 cache holding the rounded values, to the last bit.
TEST(KernelsTest, AttentionOverHalfCachesMatchesTheRoundedF32Cache) {
  ForEveryKernelVersion("attention", [&] {
  ThreadPool pool(2);
  const int64_t n_heads = 4, n_kv = 2, hd = 8, start = 9, len = 4, capacity = 16;
  const std::vector<float> q = Random(len * n_heads * hd, 10);
  const std::vector<float> k = Random(capacity * n_kv * hd, 11), v = Random(capacity * n_kv * hd, 12);
  const int kv_head_of[] = {0, 0, 1, 1};
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    std::vector<uint16_t> k16(k.size()), v16(v.size());
    std::vector<float> k_rounded(k.size()), v_rounded(v.size());
    ASSERT_TRUE(CastElements(k.data(), DType::kF32, k16.data(), dtype, k.size()).ok());
    ASSERT_TRUE(CastElements(v.data(), DType::kF32, v16.data(), dtype, v.size()).ok());
    ASSERT_TRUE(CastElements(k16.data(), dtype, k_rounded.data(), DType::kF32, k.size()).ok());
    ASSERT_TRUE(CastElements(v16.data(), dtype, v_rounded.data(), DType::kF32, v.size()).ok());
    std::vector<float> out(len * n_heads * hd), expected(out.size());
    const int32_t table[] = {0};
    Attention({q.data(), k16.data(), v16.data(), dtype, table, capacity, kv_head_of, start, len, n_heads, n_kv, hd,
               out.data()},
              pool);
    Attention({q.data(), k_rounded.data(), v_rounded.data(), DType::kF32, table, capacity, kv_head_of, start, len,
               n_heads, n_kv, hd, expected.data()},
              pool);
    EXPECT_EQ(out, expected) << DTypeName(dtype);
  }
  });
}

// Grouped-query attention with a causal prefix over a paged cache whose
// blocks are out of order, against the textbook form: few rows (a job per
// query head), many rows (a job per KV head group), and head sizes that
// take every vector loop and the scalar tail.
TEST(KernelsTest, AttentionMatchesScalar) {
  ForEveryKernelVersion("attention", [&] {
  ThreadPool pool(2);
  const struct { int64_t len, hd; } shapes[] = {{3, 8}, {8, 20}, {9, 43}};
  for (const auto& shape : shapes) {
    const int64_t n_heads = 4, n_kv = 2, hd = shape.hd, start = 5, len = shape.len, capacity = 16;
    const std::vector<float> q = Random(len * n_heads * hd, 7);
    const std::vector<float> k = Random(capacity * n_kv * hd, 8), v = Random(capacity * n_kv * hd, 9);
    const int kv_head_of[] = {0, 0, 1, 1};
    std::vector<float> out(len * n_heads * hd), expected(out.size());
    const int64_t block_size = 4;
    const int32_t table[] = {2, 0, 3, 1};
    Attention({q.data(), k.data(), v.data(), DType::kF32, table, block_size, kv_head_of, start, len, n_heads, n_kv, hd,
               out.data()},
              pool);
    const auto row_of = [&](int64_t t) { return table[t / block_size] * block_size + t % block_size; };
    for (int64_t r = 0; r < len; ++r) {
      for (int64_t h = 0; h < n_heads; ++h) {
        const int64_t kvh = h / 2, pos = start + r;
        std::vector<double> s(pos + 1);
        double max_s = -1e30, sum = 0;
        for (int64_t t = 0; t <= pos; ++t) {
          double dot = 0;
          for (int64_t d = 0; d < hd; ++d) dot += double(q[(r * n_heads + h) * hd + d]) * k[(row_of(t) * n_kv + kvh) * hd + d];
          s[t] = dot / std::sqrt(double(hd));
          max_s = std::max(max_s, s[t]);
        }
        for (double& x : s) sum += (x = std::exp(x - max_s));
        for (int64_t d = 0; d < hd; ++d) {
          double acc = 0;
          for (int64_t t = 0; t <= pos; ++t) acc += s[t] / sum * v[(row_of(t) * n_kv + kvh) * hd + d];
          expected[(r * n_heads + h) * hd + d] = static_cast<float>(acc);
        }
      }
    }
    SCOPED_TRACE(absl::StrCat("len ", len, ", head_dim ", hd));
    ExpectClose(out, expected);
  }
  });
}

// A row's attention does not depend on the rows computed with it, bit for
// bit: rows in one call (prefill: jobs of four rows, dots four rows or four
// heads to a key) against each row alone (decode: jobs of one head, dots
// four keys to a head), for multi-head, grouped and wide-group layers,
// 13 rows (a short last block), head sizes with and without a scalar tail.
TEST(KernelsTest, AttentionRowsDoNotDependOnTheirCall) {
  ForEveryKernelVersion("attention", [&] {
  ThreadPool pool(2);
  const struct { int64_t n_heads, n_kv, hd; } shapes[] = {{4, 4, 64}, {8, 4, 64}, {8, 1, 43}, {6, 2, 16}};
  for (const auto& shape : shapes) {
    const int64_t n_heads = shape.n_heads, n_kv = shape.n_kv, hd = shape.hd, start = 6, len = 13;
    const int64_t block_size = 8, capacity = 24;
    const std::vector<float> q = Random(len * n_heads * hd, 21);
    const std::vector<float> k = Random(capacity * n_kv * hd, 22), v = Random(capacity * n_kv * hd, 23);
    std::vector<int> kv_head_of(n_heads);
    for (int64_t h = 0; h < n_heads; ++h) kv_head_of[h] = static_cast<int>(h / (n_heads / n_kv));
    const int32_t table[] = {1, 2, 0};
    std::vector<float> together(len * n_heads * hd);
    Attention({q.data(), k.data(), v.data(), DType::kF32, table, block_size, kv_head_of.data(), start, len, n_heads,
               n_kv, hd, together.data()},
              pool);
    for (int64_t r = 0; r < len; ++r) {
      std::vector<float> alone(n_heads * hd);
      Attention({q.data() + r * n_heads * hd, k.data(), v.data(), DType::kF32, table, block_size, kv_head_of.data(),
                 start + r, 1, n_heads, n_kv, hd, alone.data()},
                pool);
      EXPECT_EQ(alone, std::vector<float>(together.begin() + r * n_heads * hd, together.begin() + (r + 1) * n_heads * hd))
          << n_heads << "/" << n_kv << " heads, head_dim " << hd << ", row " << r;
    }
  }
  });
}

TEST(KernelsTest, SwiGluEmbeddingAndFiniteness) {
  std::vector<float> gate = {-2.0f, 0.0f, 3.0f}, up = {1.0f, 5.0f, 2.0f};
  SwiGlu(gate.data(), up.data(), 3);
  EXPECT_NEAR(gate[0], -2.0 / (1 + std::exp(2.0)), 1e-6);
  EXPECT_EQ(gate[1], 0.0f);
  EXPECT_NEAR(gate[2], 3.0 / (1 + std::exp(-3.0)) * 2, 1e-5);
  const std::vector<uint16_t> table = {F32ToBf16(1), F32ToBf16(2), F32ToBf16(3), F32ToBf16(4)};
  std::vector<float> rows(4);
  EmbeddingLookup(Tensor::View(DType::kBF16, {2, 2}, table.data()), {1, 0}, rows.data());
  EXPECT_EQ(rows, (std::vector<float>{3, 4, 1, 2}));
  EXPECT_TRUE(CheckFinite(rows.data(), 4, "x").ok());
  rows[2] = NAN;
  absl::Status status = CheckFinite(rows.data(), 4, "after layer 3");
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(status.message().find("index 2 after layer 3"), std::string::npos) << status;
}

}  // namespace
}  // namespace llama::cpu
