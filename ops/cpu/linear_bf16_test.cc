// bf16 activations (LinearOptions::bf16_activations): every kernel this CPU
// runs against a double-precision reference on x rounded to bf16, rows
// independent of their batch bit for bit, and the option ignored where it
// does not apply. Which kernels ran is printed.

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ops/cast.h"
#include "ops/cpu/linear.h"
#include "ops/cpu/thread_pool.h"
#include "ops/random_values.h"
#include "ops/tensor.h"

namespace llama::cpu {
namespace {

using ::llama::testing::Random;

constexpr LinearOptions kBf16Activations{/*int8_activations=*/false, /*bf16_activations=*/true};

std::vector<uint16_t> ToBf16(const std::vector<float>& values) {
  std::vector<uint16_t> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = F32ToBf16(values[i]);
  return out;
}

// Every kernel the CPU runs, each for the body; the default restored after.
// Returns "ran: ...; skipped: ..." for the log.
template <typename Body>
std::string ForEachKernel(Body body) {
  const std::string chosen(Bf16ActivationsKernel());
  std::string ran, skipped;
  for (const char* kernel : {"avx512bf16", "f32"}) {
    if (!ForceBf16ActivationsKernelForTesting(kernel)) {
      skipped += std::string(kernel) + " ";
      continue;
    }
    ran += std::string(kernel) + " ";
    body(std::string(kernel));
  }
  EXPECT_TRUE(ForceBf16ActivationsKernelForTesting(chosen));
  return "ran: " + ran + "; skipped (this CPU lacks them): " + (skipped.empty() ? "none" : skipped) +
         "; chosen by default: " + chosen;
}

// The exact sum of bf16(x) * w (both exact in double) against what the
// kernel returns: f32 sums in any order err by at most K * 2^-24 * sum |x w|
// (Higham's gamma_K); twice that is the bound. A wrong pair order, lane
// permutation or row would miss by the output's own size.
TEST(LinearBf16Test, EveryKernelMatchesTheExactProductOfRoundedX) {
  ThreadPool pool(3);
  const int64_t out = 67;  // Three panels, the last one partly empty.
  const std::string log = ForEachKernel([&](const std::string& kernel) {
    for (const int64_t in : {64, 2048}) {
      const std::vector<uint16_t> w = ToBf16(Random(out * in, 1));
      absl::StatusOr<Tensor> packed = PackLinearWeight(Tensor::View(DType::kBF16, {out, in}, w.data()), pool);
      ASSERT_TRUE(packed.ok()) << packed.status();
      for (const int64_t n : {1, 2, 7, 8, 9, 40}) {
        const std::vector<float> x = Random(n * in, 100 + n);
        std::vector<float> y(n * out);
        ASSERT_TRUE(Linear(x.data(), n, *packed, y.data(), pool, kBf16Activations).ok());
        for (int64_t r = 0; r < n; ++r) {
          for (int64_t o = 0; o < out; ++o) {
            double exact = 0, magnitude = 0;
            for (int64_t k = 0; k < in; ++k) {
              const double term = static_cast<double>(Bf16ToF32(F32ToBf16(x[r * in + k]))) * Bf16ToF32(w[o * in + k]);
              exact += term;
              magnitude += std::abs(term);
            }
            ASSERT_LE(std::abs(y[r * out + o] - exact), 2.0 * in * std::ldexp(1.0, -24) * magnitude)
                << kernel << " in=" << in << " n=" << n << " (" << r << ", " << o << "): exact " << exact;
          }
        }
      }
    }
  });
  std::printf("bf16-activation kernels %s\n", log.c_str());
}

// A row's outputs are the same bit for bit whether it runs alone or among
// 1 to 40 rows (every tile size, decode and prefill shapes).
TEST(LinearBf16Test, RowsDoNotDependOnTheirBatch) {
  ThreadPool pool(2);
  const int64_t out = 96, in = 512, n = 40;
  const std::vector<uint16_t> w = ToBf16(Random(out * in, 2));
  absl::StatusOr<Tensor> packed = PackLinearWeight(Tensor::View(DType::kBF16, {out, in}, w.data()), pool);
  ASSERT_TRUE(packed.ok()) << packed.status();
  const std::vector<float> x = Random(n * in, 3);
  ForEachKernel([&](const std::string& kernel) {
    std::vector<float> alone(n * out);
    for (int64_t r = 0; r < n; ++r) {
      ASSERT_TRUE(Linear(x.data() + r * in, 1, *packed, alone.data() + r * out, pool, kBf16Activations).ok());
    }
    for (int64_t batch = 2; batch <= n; ++batch) {
      std::vector<float> together(batch * out);
      ASSERT_TRUE(Linear(x.data(), batch, *packed, together.data(), pool, kBf16Activations).ok());
      ASSERT_EQ(0, std::memcmp(together.data(), alone.data(), together.size() * sizeof(float)))
          << kernel << ": a batch of " << batch;
    }
  });
}

// f32 and f16 weights ignore the option: their outputs are the default's.
TEST(LinearBf16Test, OtherWeightsIgnoreTheOption) {
  ThreadPool pool(2);
  const int64_t out = 40, in = 128, n = 5;
  const std::vector<float> w = Random(out * in, 4), x = Random(n * in, 5);
  std::vector<uint16_t> w16(w.size());
  for (size_t i = 0; i < w.size(); ++i) w16[i] = F32ToF16(w[i]);
  for (const Tensor& weight : {Tensor::View(DType::kF32, {out, in}, w.data()),
                               Tensor::View(DType::kF16, {out, in}, w16.data())}) {
    absl::StatusOr<Tensor> packed = PackLinearWeight(weight, pool);
    ASSERT_TRUE(packed.ok()) << packed.status();
    std::vector<float> plain(n * out), with_option(n * out);
    ASSERT_TRUE(Linear(x.data(), n, *packed, plain.data(), pool).ok());
    ASSERT_TRUE(Linear(x.data(), n, *packed, with_option.data(), pool, kBf16Activations).ok());
    EXPECT_EQ(0, std::memcmp(plain.data(), with_option.data(), plain.size() * sizeof(float)))
        << DTypeName(weight.dtype());
  }
}

}  // namespace
}  // namespace llama::cpu
