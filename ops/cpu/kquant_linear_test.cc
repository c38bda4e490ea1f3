// The K-quant linear layers (kquant_linear.h: q4_k and q6_k, llama.cpp's
// Q4_K and Q6_K), each type through the same checks: every integer kernel
// this CPU runs gives the same bits as the scalar one (the same f32
// operations), and matches a reference written here (x quantized per 256 by
// the kernels' rule, exact integer sums, a double accumulator); decode
// stays within the int8 rounding of x of the f32 product with
// DecodeGgmlRow's weights; prefill is that f32 product exactly; a row's
// outputs do not depend on its batch. Which kernels ran is printed.

#include <cfloat>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ops/cast.h"
#include "ops/cpu/linear.h"
#include "ops/cpu/simd.h"
#include "ops/cpu/thread_pool.h"
#include "ops/ggml_blocks.h"
#include "ops/quantize.h"
#include "ops/random_values.h"
#include "ops/tensor.h"

namespace llama::cpu {
namespace {

using ::llama::testing::Random;

std::vector<float> Decoded(uint32_t type, const std::vector<uint8_t>& w, int64_t out, int64_t in) {
  std::vector<float> values(out * in);
  EXPECT_TRUE(DecodeGgmlRow(type, w.data(), out * in, values.data()).ok());
  return values;
}

// Random Q4_K rows: any nibbles and 6-bit scales are valid; d and dmin of
// the size llama-quantize gives weights of magnitude ~1.
std::vector<uint8_t> RandomQ4K(int64_t out, int64_t in, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> scale(0.002f, 0.02f);
  std::vector<uint8_t> w(out * in / 256 * 144);
  for (size_t b = 0; b < w.size() / 144; ++b) {
    uint8_t* block = w.data() + b * 144;
    const uint16_t d = F32ToF16(scale(rng)), dmin = F32ToF16(scale(rng));
    std::memcpy(block, &d, 2);
    std::memcpy(block + 2, &dmin, 2);
    for (int i = 4; i < 144; ++i) block[i] = static_cast<uint8_t>(rng());
  }
  return w;
}

// Random Q6_K rows: any bits and int8 scales are valid; d of the size
// llama-quantize gives weights of magnitude ~1 (d * 127 * 32 ~ 1).
std::vector<uint8_t> RandomQ6K(int64_t out, int64_t in, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> scale(0.0001f, 0.0004f);
  std::vector<uint8_t> w(out * in / 256 * 210);
  for (size_t b = 0; b < w.size() / 210; ++b) {
    uint8_t* block = w.data() + b * 210;
    for (int i = 0; i < 208; ++i) block[i] = static_cast<uint8_t>(rng());
    const uint16_t d = F32ToF16(scale(rng));
    std::memcpy(block + 208, &d, 2);
  }
  return w;
}

// Q4_K's weights as their scales' part (d * scale * q) and their minimums'
// part (-dmin * min), decoded apart and added in size: the kernels add the
// two in f32 lanes, and they cancel.
std::vector<float> Q4KTermSizes(const std::vector<uint8_t>& w, int64_t out, int64_t in) {
  std::vector<uint8_t> scaled = w, minimums = w;
  for (size_t b = 0; b < w.size() / 144; ++b) {
    std::memset(scaled.data() + b * 144 + 2, 0, 2);
    std::memset(minimums.data() + b * 144, 0, 2);
  }
  constexpr uint32_t kType = static_cast<uint32_t>(GgmlType::kQ4_K);
  std::vector<float> sizes = Decoded(kType, scaled, out, in);
  const std::vector<float> m = Decoded(kType, minimums, out, in);
  for (size_t i = 0; i < sizes.size(); ++i) sizes[i] = std::abs(sizes[i]) + std::abs(m[i]);
  return sizes;
}

// Q6_K's offset of 32 is taken in integers: the terms are the weights.
std::vector<float> Q6KTermSizes(const std::vector<uint8_t>& w, int64_t out, int64_t in) {
  std::vector<float> sizes = Decoded(static_cast<uint32_t>(GgmlType::kQ6_K), w, out, in);
  for (float& v : sizes) v = std::abs(v);
  return sizes;
}

struct KQuant {
  const char* name;
  DType dtype;
  GgmlType ggml;
  int block_bytes;
  std::vector<uint8_t> (*random)(int64_t out, int64_t in, uint32_t seed);
  std::vector<float> (*term_sizes)(const std::vector<uint8_t>& w, int64_t out, int64_t in);
  // f32 roundings per super-block in each lane.
  int roundings_per_block;
  std::string_view (*kernel)();
  bool (*force)(std::string_view name);
};

const KQuant kKQuants[] = {
    {"q4_k", DType::kQ4_K, GgmlType::kQ4_K, 144, RandomQ4K, Q4KTermSizes, 2, Q4KKernel, ForceQ4KKernelForTesting},
    {"q6_k", DType::kQ6_K, GgmlType::kQ6_K, 210, RandomQ6K, Q6KTermSizes, 1, Q6KKernel, ForceQ6KKernelForTesting},
};

void PrintTo(const KQuant& type, std::ostream* os) { *os << type.name; }

class KQuantLinearTest : public ::testing::TestWithParam<KQuant> {
 protected:
  std::vector<float> Decoded(const std::vector<uint8_t>& w, int64_t out, int64_t in) {
    return ::llama::cpu::Decoded(static_cast<uint32_t>(GetParam().ggml), w, out, in);
  }
  absl::StatusOr<Tensor> Packed(const std::vector<uint8_t>& w, int64_t out, int64_t in, ThreadPool& pool) {
    return PackLinearWeight(Tensor::View(GetParam().dtype, {out, in}, w.data()), pool);
  }
};

// Runs `check` once with each compiled version (x86-64-v3 where the CPU
// has it, and the baseline) of the code around the kernels (x's
// quantization, the prefill panels' widening), then restores the default;
// returns the versions that ran.
template <typename Check>
std::string ForEveryVersion(Check check) {
  const bool v3_by_default = simd::UseV3();
  std::string versions;
  for (bool v3 : {true, false}) {
    if (!simd::ForceV3ForTesting(v3)) continue;
    versions += std::string(simd::KernelVersion()) + " ";
    check();
  }
  EXPECT_TRUE(simd::ForceV3ForTesting(v3_by_default));
  return versions;
}

// x's rounding as the kernels do it: per 256, d = max|x| / 127, q = round(x / d).
void QuantizeLikeTheKernels(const float* x, int64_t in, std::vector<int8_t>* q, std::vector<float>* d) {
  q->resize(in);
  d->resize(in / 256);
  for (int64_t b = 0; b < in / 256; ++b) {
    float amax = 0;
    for (int i = 0; i < 256; ++i) amax = std::max(amax, std::fabs(x[b * 256 + i]));
    (*d)[b] = amax / 127;
    const float id = InverseScale((*d)[b]);
    for (int i = 0; i < 256; ++i) (*q)[b * 256 + i] = static_cast<int8_t>(std::lround(x[b * 256 + i] * id));
  }
}

// The decoded weights times the rounded x, in double (the kernels' math
// with no f32 rounding), and for each output the sum of the sizes of the
// terms the kernels add in f32, which bounds their rounding.
struct Expected {
  std::vector<double> y, size;
};
Expected Reference(const KQuant& type, const std::vector<float>& x, int64_t n, const std::vector<uint8_t>& blocks,
                   int64_t out, int64_t in) {
  const std::vector<float> w = Decoded(static_cast<uint32_t>(type.ggml), blocks, out, in);
  const std::vector<float> sizes = type.term_sizes(blocks, out, in);
  Expected e{std::vector<double>(n * out), std::vector<double>(n * out)};
  for (int64_t r = 0; r < n; ++r) {
    std::vector<int8_t> q;
    std::vector<float> d;
    QuantizeLikeTheKernels(x.data() + r * in, in, &q, &d);
    for (int64_t o = 0; o < out; ++o) {
      double sum = 0, size = 0;
      for (int64_t k = 0; k < in; ++k) {
        const double xk = static_cast<double>(d[k / 256]) * q[k];
        sum += w[o * in + k] * xk;
        size += std::abs(xk) * sizes[o * in + k];
      }
      e.y[r * out + o] = sum;
      e.size[r * out + o] = size;
    }
  }
  return e;
}

TEST_P(KQuantLinearTest, EveryKernelGivesTheScalarBitsAndMatchesTheReference) {
  const int64_t out = 37, in = 768;
  ThreadPool pool(3);
  const KQuant& type = GetParam();
  const std::vector<uint8_t> w = type.random(out, in, 1);
  absl::StatusOr<Tensor> weight = Packed(w, out, in, pool);
  ASSERT_TRUE(weight.ok()) << weight.status();
  const std::string chosen(type.kernel());
  const int64_t prefetch_by_default = WeightPrefetchBytes();
  std::string ran, skipped;
  // Past decode's batch, the integer kernels take x with int8_activations.
  LinearOptions int8;
  int8.int8_activations = true;
  // Every kernel row count (1-16: AVX2's past 4 and AVX-512 q6_k's past 8
  // in passes) and tiles of 16 with the rest (17, 33).
  for (int64_t n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 33}) {
    const std::vector<float> x = Random(n * in, 100 + n);
    ASSERT_TRUE(type.force("scalar"));
    std::vector<float> scalar(n * out);
    ASSERT_TRUE(Linear(x.data(), n, *weight, scalar.data(), pool, int8).ok());
    const Expected expected = Reference(type, x, n, w, out, in);
    for (size_t i = 0; i < scalar.size(); ++i) {
      // Each lane takes one or two f32 fused multiply-adds a super-block
      // (three here), its factors dx * d one more rounding, the sum of the
      // lanes three, the reference's decoded weights one or two: each at
      // most an epsilon of the terms' sizes.
      const double roundings = type.roundings_per_block * (in / 256) + 8;
      ASSERT_NEAR(scalar[i], expected.y[i], roundings * FLT_EPSILON * expected.size[i] + 1e-30) << "n=" << n << " @" << i;
    }
    for (const char* kernel : {"avx512vnni", "avx2"}) {
      if (!type.force(kernel)) {
        if (n == 1) skipped += std::string(kernel) + " ";
        continue;
      }
      if (n == 1) ran += std::string(kernel) + " ";
      // With and without the weights prefetched (linear.h: per CPU vendor).
      for (const int64_t ahead : {int64_t{0}, int64_t{2048}}) {
        SetWeightPrefetchBytes(ahead);
        std::vector<float> y(n * out);
        ASSERT_TRUE(Linear(x.data(), n, *weight, y.data(), pool, int8).ok());
        EXPECT_EQ(y, scalar) << kernel << " n=" << n << " prefetch " << ahead;
      }
    }
  }
  SetWeightPrefetchBytes(prefetch_by_default);
  ASSERT_TRUE(type.force(chosen));
  std::printf("%s kernels run: %sscalar; skipped (this CPU lacks them): %s; chosen by default: %s\n", type.name, ran.c_str(),
              skipped.empty() ? "none" : skipped.c_str(), chosen.c_str());
  EXPECT_FALSE(type.force("avx1024"));
}

// x's rounding is std::lround's (halves away from zero) in both compiled
// versions of the quantizer, on values made of halves and of the floats
// just below them: max |x| = 127 (then 63.5) makes d = 1 (0.5), so these
// are the values lround sees. One value rounded the wrong way moves its
// output by a weight, far outside the reference's bound.
TEST_P(KQuantLinearTest, XIsRoundedHalvesAwayFromZeroByEveryVersion) {
  const int64_t out = 8, in = 512;
  ThreadPool pool(2);
  const KQuant& type = GetParam();
  const std::vector<uint8_t> w = type.random(out, in, 9);
  absl::StatusOr<Tensor> weight = Packed(w, out, in, pool);
  ASSERT_TRUE(weight.ok()) << weight.status();
  std::vector<float> x(in);
  std::mt19937 rng(10);
  for (int64_t i = 0; i < 256; ++i) {
    const float half = static_cast<float>(rng() % 126) + 0.5f;
    const float value = i % 3 == 2 ? std::nextafter(half, 0.0f) : half;
    x[i] = rng() % 2 ? value : -value;
    x[256 + i] = x[i] / 2;
  }
  x[0] = 127;
  x[256] = -63.5f;
  x[1] = 0.49999997f;
  x[2] = -0.49999997f;
  x[3] = 126.5f;
  const Expected expected = Reference(type, x, 1, w, out, in);
  const std::string chosen(type.kernel());
  ASSERT_TRUE(type.force("scalar"));
  const std::string versions = ForEveryVersion([&] {
    std::vector<float> y(out);
    ASSERT_TRUE(Linear(x.data(), 1, *weight, y.data(), pool).ok());
    for (int64_t o = 0; o < out; ++o) {
      const double roundings = type.roundings_per_block * (in / 256) + 8;
      EXPECT_NEAR(y[o], expected.y[o], roundings * FLT_EPSILON * expected.size[o]) << simd::KernelVersion() << " @" << o;
    }
  });
  ASSERT_TRUE(type.force(chosen));
  std::printf("%s x quantized by: %s\n", type.name, versions.c_str());
}

// As for q8_0 (linear_q8_test): a super-block of x too small to invert its
// scale quantizes to zeros in every version, so y is 0 exactly.
TEST_P(KQuantLinearTest, XTooSmallToInvertItsScaleIsZeroInEveryVersion) {
  const int64_t out = 8, in = 256;
  ThreadPool pool(2);
  const KQuant& type = GetParam();
  absl::StatusOr<Tensor> weight = Packed(type.random(out, in, 11), out, in, pool);
  ASSERT_TRUE(weight.ok()) << weight.status();
  std::vector<float> x(in);
  for (int64_t i = 0; i < in; ++i) x[i] = (i % 2 ? 1e-38f : -1e-38f) * static_cast<float>(1 + i % 7);
  const std::string chosen(type.kernel());
  ASSERT_TRUE(type.force("scalar"));
  ForEveryVersion([&] {
    std::vector<float> y(out, 1.0f);
    ASSERT_TRUE(Linear(x.data(), 1, *weight, y.data(), pool).ok());
    for (int64_t o = 0; o < out; ++o) EXPECT_EQ(y[o], 0.0f) << simd::KernelVersion() << " @" << o;
  });
  ASSERT_TRUE(type.force(chosen));
}

// Against f32 x times DecodeGgmlRow's weights: rounding x to int8 moves
// each x[k] by at most d / 2 of its super-block, so the output by at most
// the sum of |w[k]| * d / 2 (plus f32 rounding); the random inputs use
// about a fifth of that bound on average.
TEST_P(KQuantLinearTest, DecodeIsWithinTheInt8RoundingOfXOfTheF32Product) {
  const int64_t out = 16, in = 512, n = 2;
  ThreadPool pool(2);
  const std::vector<uint8_t> w = GetParam().random(out, in, 5);
  const std::vector<float> decoded = Decoded(w, out, in);
  const std::vector<float> x = Random(n * in, 6);
  absl::StatusOr<Tensor> weight = Packed(w, out, in, pool);
  ASSERT_TRUE(weight.ok()) << weight.status();
  std::vector<float> y(n * out);
  ASSERT_TRUE(Linear(x.data(), n, *weight, y.data(), pool).ok());
  for (int64_t r = 0; r < n; ++r) {
    std::vector<int8_t> q;
    std::vector<float> d;
    QuantizeLikeTheKernels(x.data() + r * in, in, &q, &d);
    for (int64_t o = 0; o < out; ++o) {
      double exact = 0, bound = 0;
      for (int64_t k = 0; k < in; ++k) {
        exact += static_cast<double>(decoded[o * in + k]) * x[r * in + k];
        bound += std::abs(decoded[o * in + k]) * d[k / 256] / 2;
      }
      EXPECT_LE(std::abs(y[r * out + o] - exact), bound + 1e-5 * (1 + std::abs(exact))) << r << " " << o;
    }
  }
}

// Prefill (more rows than decode takes): DecodeGgmlRow's values in the f32
// panels, so the same bits as an f32 weight holding them; 40 rows leave the
// second panel partly empty.
TEST_P(KQuantLinearTest, PrefillEqualsF32OnTheDecodedWeights) {
  const int64_t out = 40, in = 256, n = 33;
  ThreadPool pool(2);
  const std::vector<uint8_t> w = GetParam().random(out, in, 2);
  std::vector<float> decoded = Decoded(w, out, in);
  const std::vector<float> x = Random(n * in, 3);
  absl::StatusOr<Tensor> packed = Packed(w, out, in, pool);
  ASSERT_TRUE(packed.ok()) << packed.status();
  absl::StatusOr<Tensor> f32 = PackLinearWeight(Tensor::View(DType::kF32, {out, in}, decoded.data()), pool);
  ASSERT_TRUE(f32.ok()) << f32.status();
  std::vector<float> expected(n * out);
  ASSERT_TRUE(Linear(x.data(), n, *f32, expected.data(), pool).ok());
  // Both versions of the panels' widening (the v3 one transposes in registers).
  ForEveryVersion([&] {
    std::vector<float> y(n * out);
    ASSERT_TRUE(Linear(x.data(), n, *packed, y.data(), pool).ok());
    EXPECT_EQ(y, expected) << simd::KernelVersion();
  });
}

// Batch invariance where it holds: a row's outputs from the integer
// kernels do not depend on the other rows (up to 12 rows at decode; any
// number with int8_activations), bit for bit. 300 outputs: prefill splits
// them into tasks of another size than decode does (three, the last short).
TEST_P(KQuantLinearTest, IntegerKernelRowsAreIndependentOfTheirBatch) {
  const int64_t out = 300, in = 512, rows = 20;
  ThreadPool pool(3);
  const std::vector<uint8_t> w = GetParam().random(out, in, 7);
  absl::StatusOr<Tensor> weight = Packed(w, out, in, pool);
  ASSERT_TRUE(weight.ok()) << weight.status();
  const std::vector<float> x = Random(rows * in, 8);
  LinearOptions int8;
  int8.int8_activations = true;
  std::vector<float> all(rows * out);
  ASSERT_TRUE(Linear(x.data(), rows, *weight, all.data(), pool, int8).ok());
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<float> one(out);
    ASSERT_TRUE(Linear(x.data() + r * in, 1, *weight, one.data(), pool).ok());
    EXPECT_EQ(one, std::vector<float>(all.begin() + r * out, all.begin() + (r + 1) * out)) << r;
  }
}

TEST_P(KQuantLinearTest, RowsMustBeWholeSuperBlocks) {
  ThreadPool pool(1);
  std::vector<uint8_t> w(GetParam().block_bytes * 2);
  const absl::StatusOr<Tensor> packed = PackLinearWeight(Tensor::View(GetParam().dtype, {3, 96}, w.data()), pool);
  ASSERT_FALSE(packed.ok());
  EXPECT_THAT(packed.status().message(), ::testing::HasSubstr("expected rows of whole super-blocks of 256"));
}

// Linears (q, k and v sharing x): K-quant weights of both types in one
// pass give what Linear gives each, bit for bit, at decode and at prefill
// (where each takes Linear's panels).
TEST(KQuantLinearsTest, SharedXGivesEachLinearsBits) {
  const int64_t in = 512;
  ThreadPool pool(3);
  const std::vector<uint8_t> q4a = RandomQ4K(40, in, 11), q4b = RandomQ4K(24, in, 12), q6 = RandomQ6K(16, in, 13);
  std::vector<Tensor> weights;
  for (const auto& [dtype, blocks, out] : {std::tuple{DType::kQ4_K, &q4a, int64_t{40}},
                                           std::tuple{DType::kQ6_K, &q6, int64_t{16}},
                                           std::tuple{DType::kQ4_K, &q4b, int64_t{24}}}) {
    absl::StatusOr<Tensor> packed = PackLinearWeight(Tensor::View(dtype, {out, in}, blocks->data()), pool);
    ASSERT_TRUE(packed.ok()) << packed.status();
    weights.push_back(*std::move(packed));
  }
  for (int64_t n : {1, 5, 20}) {
    const std::vector<float> x = Random(n * in, 14 + n);
    std::vector<std::vector<float>> together, alone;
    std::vector<LinearOutput> outputs;
    for (const Tensor& w : weights) {
      together.emplace_back(n * w.dim(0));
      alone.emplace_back(n * w.dim(0));
    }
    for (size_t i = 0; i < weights.size(); ++i) outputs.push_back({&weights[i], together[i].data()});
    ASSERT_TRUE(Linears(x.data(), n, outputs, pool).ok());
    for (size_t i = 0; i < weights.size(); ++i) {
      ASSERT_TRUE(Linear(x.data(), n, weights[i], alone[i].data(), pool).ok());
      EXPECT_EQ(together[i], alone[i]) << "n=" << n << " weight " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, KQuantLinearTest, ::testing::ValuesIn(kKQuants),
                         [](const ::testing::TestParamInfo<KQuant>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace llama::cpu
