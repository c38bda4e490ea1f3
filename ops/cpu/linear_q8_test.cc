// int8 (q8_0) linear layers: every integer kernel this CPU runs against a
// scalar reference written here (exact int32 block sums, the two scales, a
// double accumulator), and the prefill path against f32 math on the
// dequantized weights. Which kernels ran is printed.

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ops/cast.h"
#include "absl/strings/str_cat.h"
#include "ops/cpu/linear.h"
#include "ops/cpu/simd.h"
#include "ops/cpu/thread_pool.h"
#include "ops/quantize.h"
#include "ops/random_values.h"
#include "ops/tensor.h"

namespace llama::cpu {
namespace {

using ::llama::testing::Random;

// The reference: x rows quantized as the kernels do (llama.cpp's Q8_0
// rule with an f32 scale), block sums in int32, everything else in double.
std::vector<float> Reference(const std::vector<float>& x, int64_t n, const std::vector<uint8_t>& w, int64_t out,
                             int64_t in) {
  std::vector<float> y(n * out);
  const int64_t blocks = in / 32;
  for (int64_t r = 0; r < n; ++r) {
    std::vector<int8_t> q(in);
    std::vector<float> d(blocks);
    for (int64_t b = 0; b < blocks; ++b) {
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[r * in + b * 32 + i]));
      d[b] = amax / 127;
      const float id = InverseScale(d[b]);
      for (int i = 0; i < 32; ++i) q[b * 32 + i] = static_cast<int8_t>(std::lround(x[r * in + b * 32 + i] * id));
    }
    for (int64_t o = 0; o < out; ++o) {
      double sum = 0;
      for (int64_t b = 0; b < blocks; ++b) {
        const uint8_t* block = w.data() + (o * blocks + b) * 34;
        int32_t isum = 0;
        for (int i = 0; i < 32; ++i) isum += static_cast<int8_t>(block[2 + i]) * q[b * 32 + i];
        sum += static_cast<double>(F16ToF32(static_cast<uint16_t>(block[0] | block[1] << 8))) * d[b] * isum;
      }
      y[r * out + o] = static_cast<float>(sum);
    }
  }
  return y;
}

TEST(LinearQ8Test, EveryIntegerKernelMatchesTheReference) {
  const int64_t out = 67;
  ThreadPool pool(3);
  const std::string chosen(Int8Kernel());
  const int64_t prefetch_by_default = WeightPrefetchBytes();
  std::string ran, skipped;
  for (const char* kernel : {"avx512vnni", "avx2", "scalar"}) {
    if (!ForceInt8KernelForTesting(kernel)) {
      skipped += std::string(kernel) + " ";
      continue;
    }
    ran += std::string(kernel) + " ";
    // 16 blocks a row, and 15 (a remainder after the kernels' 2 or 4 chains).
    for (const int64_t in : {512, 480}) {
      std::vector<uint8_t> w(out * in / 32 * 34);
      ASSERT_TRUE(QuantizeQ8_0(Random(out * in, 1).data(), out * in, w.data()).ok());
      absl::StatusOr<Tensor> weight = PackLinearWeight(Tensor::View(DType::kQ8_0, {out, in}, w.data()), pool);
      ASSERT_TRUE(weight.ok()) << weight.status();
      for (int64_t n : {1, 2, 3, 4, 5, 7, 8, 9, 12}) {
        const std::vector<float> x = Random(n * in, 100 + n);
        std::vector<float> y(n * out);
        SetWeightPrefetchBytes(0);
        ASSERT_TRUE(Linear(x.data(), n, *weight, y.data(), pool).ok());
        const std::vector<float> expected = Reference(x, n, w, out, in);
        for (size_t i = 0; i < y.size(); ++i) {
          // f32 accumulation over 16 block terms in another order.
          ASSERT_NEAR(y[i], expected[i], 1e-4 + 1e-5 * std::abs(expected[i]))
              << kernel << " in=" << in << " n=" << n << " @" << i;
        }
        // The weights prefetched (linear.h: per CPU vendor) change no bit.
        std::vector<float> prefetched(n * out);
        SetWeightPrefetchBytes(2048);
        ASSERT_TRUE(Linear(x.data(), n, *weight, prefetched.data(), pool).ok());
        EXPECT_EQ(prefetched, y) << kernel << " in=" << in << " n=" << n;
      }
    }
  }
  SetWeightPrefetchBytes(prefetch_by_default);
  ASSERT_TRUE(ForceInt8KernelForTesting(chosen));
  std::printf("int8 kernels run: %s; skipped (this CPU lacks them): %s; chosen by default: %s\n", ran.c_str(),
              skipped.empty() ? "none" : skipped.c_str(), chosen.c_str());
  EXPECT_FALSE(ForceInt8KernelForTesting("avx1024"));
}

// Runs `check` (named by KernelVersion and the kernel) once with each x
// quantizer version for the kernel that takes x signed (scalar) and the one
// that takes it unsigned (avx512vnni, where the CPU has it), then restores
// the defaults; returns what ran.
template <typename Check>
std::string ForEveryXQuantizer(Check check) {
  const std::string chosen(Int8Kernel());
  const bool v3_by_default = simd::UseV3();
  std::string ran;
  for (const char* kernel : {"avx512vnni", "scalar"}) {
    if (!ForceInt8KernelForTesting(kernel)) continue;
    for (const bool v3 : {false, true}) {
      if (!simd::ForceV3ForTesting(v3)) continue;
      absl::StrAppend(&ran, ran.empty() ? "" : ", ", kernel, " ", simd::KernelVersion());
      check(absl::StrCat(kernel, " ", simd::KernelVersion()));
    }
  }
  EXPECT_TRUE(simd::ForceV3ForTesting(v3_by_default));
  EXPECT_TRUE(ForceInt8KernelForTesting(chosen));
  return ran;
}

// x's rounding is std::lround's (halves away from zero) in both compiled
// versions of the quantizer, for the kernel that takes x signed and the
// one that takes it unsigned: values made of halves and the floats just
// below them, with max |x| = 127 a block (d = 1). One value rounded the
// wrong way moves an output by a weight, far outside the tolerance.
TEST(LinearQ8Test, XIsRoundedHalvesAwayFromZeroByEveryVersion) {
  const int64_t out = 8, in = 128;
  std::vector<uint8_t> w(out * in / 32 * 34);
  ASSERT_TRUE(QuantizeQ8_0(Random(out * in, 11).data(), out * in, w.data()).ok());
  ThreadPool pool(2);
  absl::StatusOr<Tensor> weight = PackLinearWeight(Tensor::View(DType::kQ8_0, {out, in}, w.data()), pool);
  ASSERT_TRUE(weight.ok()) << weight.status();
  std::vector<float> x(in);
  std::mt19937 rng(12);
  for (int64_t i = 0; i < in; ++i) {
    const float half = static_cast<float>(rng() % 126) + 0.5f;
    const float value = i % 3 == 2 ? std::nextafter(half, 0.0f) : half;
    x[i] = i % 32 == 0 ? 127.0f : rng() % 2 ? value : -value;
  }
  x[1] = 0.49999997f;
  x[2] = -0.49999997f;
  const std::vector<float> expected = Reference(x, 1, w, out, in);
  const std::string ran = ForEveryXQuantizer([&](const std::string& version) {
    std::vector<float> y(out);
    ASSERT_TRUE(Linear(x.data(), 1, *weight, y.data(), pool).ok());
    for (int64_t o = 0; o < out; ++o) EXPECT_NEAR(y[o], expected[o], 1e-4 + 1e-5 * std::abs(expected[o])) << version;
  });
  std::printf("q8_0 x quantized by: %s\n", ran.c_str());
}

// A block whose max|x| is under ~3.7e-37 has a scale d whose inverse
// overflows: every version quantizes it to zeros (InverseScale), so y is 0
// exactly, where v * inf had the vector versions write +-1.
TEST(LinearQ8Test, XTooSmallToInvertItsScaleIsZeroInEveryVersion) {
  const int64_t out = 8, in = 64;
  std::vector<uint8_t> w(out * in / 32 * 34);
  ASSERT_TRUE(QuantizeQ8_0(Random(out * in, 13).data(), out * in, w.data()).ok());
  ThreadPool pool(2);
  absl::StatusOr<Tensor> weight = PackLinearWeight(Tensor::View(DType::kQ8_0, {out, in}, w.data()), pool);
  ASSERT_TRUE(weight.ok()) << weight.status();
  std::vector<float> x(in);
  for (int64_t i = 0; i < in; ++i) x[i] = (i % 2 ? 1e-38f : -1e-38f) * static_cast<float>(1 + i % 7);
  ForEveryXQuantizer([&](const std::string& version) {
    std::vector<float> y(out, 1.0f);
    ASSERT_TRUE(Linear(x.data(), 1, *weight, y.data(), pool).ok());
    for (int64_t o = 0; o < out; ++o) EXPECT_EQ(y[o], 0.0f) << version << " @" << o;
  });
}

// Prefill (more rows than decode handles): f32 activations times the
// dequantized weights, the same as an f32 weight holding those values.
// It widens the packed weights into f32 panels: the same products as
// DequantizeQ8_0 (bit-identical results to f32 weights dequantized by it),
// with the AVX2 widening and the portable one; 40 rows leave the second
// panel's last three groups empty.
TEST(LinearQ8Test, PrefillEqualsF32OnTheDequantizedWeights) {
  const int64_t out = 40, in = 256, n = 33;
  std::vector<uint8_t> w(out * in / 32 * 34);
  ASSERT_TRUE(QuantizeQ8_0(Random(out * in, 2).data(), out * in, w.data()).ok());
  std::vector<float> dequantized(out * in);
  DequantizeQ8_0(w.data(), out * in, dequantized.data());
  const std::vector<float> x = Random(n * in, 3);
  ThreadPool pool(2);
  absl::StatusOr<Tensor> packed = PackLinearWeight(Tensor::View(DType::kQ8_0, {out, in}, w.data()), pool);
  ASSERT_TRUE(packed.ok()) << packed.status();
  absl::StatusOr<Tensor> f32 = PackLinearWeight(Tensor::View(DType::kF32, {out, in}, dequantized.data()), pool);
  ASSERT_TRUE(f32.ok()) << f32.status();
  std::vector<float> expected(n * out);
  ASSERT_TRUE(Linear(x.data(), n, *f32, expected.data(), pool).ok());
  const bool v3_by_default = simd::UseV3();
  std::string ran;
  for (const bool v3 : {false, true}) {
    if (!simd::ForceV3ForTesting(v3)) continue;
    absl::StrAppend(&ran, ran.empty() ? "" : ", ", simd::KernelVersion());
    std::vector<float> y(n * out);
    ASSERT_TRUE(Linear(x.data(), n, *packed, y.data(), pool).ok());
    EXPECT_EQ(y, expected) << simd::KernelVersion();
  }
  ASSERT_TRUE(simd::ForceV3ForTesting(v3_by_default));
  std::printf("q8_0 panel widening versions run: %s\n", ran.c_str());
}

// With int8 activations for every row (LinearOptions), prefill takes the
// same integer kernel as decode and sums each row's blocks in the same
// order: a row's outputs do not depend on the rows computed with it, bit
// for bit, with every kernel this CPU runs; and 33 rows match the reference.
// 300 outputs: prefill's tasks of 16 groups, decode's of 4, both with a
// short last one.
TEST(LinearQ8Test, Int8ActivationsMakeRowsIndependentOfTheirBatch) {
  const int64_t out = 300, in = 96, rows = 40;
  std::vector<uint8_t> w(out * in / 32 * 34);
  ASSERT_TRUE(QuantizeQ8_0(Random(out * in, 7).data(), out * in, w.data()).ok());
  ThreadPool pool(3);
  absl::StatusOr<Tensor> weight = PackLinearWeight(Tensor::View(DType::kQ8_0, {out, in}, w.data()), pool);
  ASSERT_TRUE(weight.ok()) << weight.status();
  const std::vector<float> x = Random(rows * in, 8);
  LinearOptions int8;
  int8.int8_activations = true;
  const std::string chosen(Int8Kernel());
  for (const char* kernel : {"avx512vnni", "avx2", "scalar"}) {
    if (!ForceInt8KernelForTesting(kernel)) continue;
    std::vector<float> all(rows * out);
    ASSERT_TRUE(Linear(x.data(), rows, *weight, all.data(), pool, int8).ok());
    const std::vector<float> expected = Reference(std::vector<float>(x.begin(), x.begin() + 33 * in), 33, w, out, in);
    for (int64_t i = 0; i < 33 * out; ++i) {
      ASSERT_NEAR(all[i], expected[i], 1e-4 + 1e-5 * std::abs(expected[i])) << kernel << " @" << i;
    }
    for (int64_t n : {1, 2, 3, 5, 8, 9, 13}) {
      for (int64_t first = 0; first + n <= rows; first += n) {
        std::vector<float> some(n * out);
        ASSERT_TRUE(Linear(x.data() + first * in, n, *weight, some.data(), pool, int8).ok());
        for (int64_t i = 0; i < n * out; ++i) {
          ASSERT_EQ(some[i], all[first * out + i]) << kernel << " rows [" << first << ", " << first + n << ") @" << i;
        }
      }
    }
  }
  ASSERT_TRUE(ForceInt8KernelForTesting(chosen));
}

TEST(QuantizeTest, Q8_0IsLlamaCppsRule) {
  // One block: the largest magnitude maps to +-127, d = amax / 127 in f16.
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = (i - 16) * 0.25f;  // -4 .. 3.75
  std::vector<uint8_t> block(34);
  ASSERT_TRUE(QuantizeQ8_0(x.data(), 32, block.data()).ok());
  EXPECT_EQ(F16ToF32(static_cast<uint16_t>(block[0] | block[1] << 8)), F16ToF32(F32ToF16(4.0f / 127)));
  EXPECT_EQ(static_cast<int8_t>(block[2]), -127);
  EXPECT_EQ(static_cast<int8_t>(block[2 + 16]), 0);
  EXPECT_EQ(static_cast<int8_t>(block[2 + 31]), static_cast<int8_t>(std::lround(3.75f * 127 / 4)));
  std::vector<float> back(32);
  DequantizeQ8_0(block.data(), 32, back.data());
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(back[i], x[i], 4.0f / 127 / 2 + 1e-3) << i;
  // All zeros: scale 0, values 0; NaN refused with its index.
  std::fill(x.begin(), x.end(), 0.0f);
  ASSERT_TRUE(QuantizeQ8_0(x.data(), 32, block.data()).ok());
  EXPECT_EQ(block[0] | block[1], 0);
  x[5] = std::nanf("");
  absl::Status status = QuantizeQ8_0(x.data(), 32, block.data());
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("element 5"), absl::string_view::npos) << status;
}

}  // namespace
}  // namespace llama::cpu
