// The vector f16 widening against ops/cast.h's scalar F16ToF32 on all 65536
// bit patterns (zeros, subnormals, normals, infinities, NaNs with their
// payloads), bit for bit, both as this file is compiled (baseline x86-64)
// inside an x86-64-v3 function, and through F16C there (which keeps every
// value but quiets signalling NaNs), where the CPU runs v3 code; and the
// bf16 widenings (generic and the v3 one) on all 65536 patterns; the vector
// e^x against the exact value, in ulps, over every float of [-87, 88] in
// steps of 1/4096 and at the edges.

#include "ops/cpu/simd.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "ops/cast.h"

namespace llama::cpu::simd {
namespace {

void WidenBaseline(const F16* in, size_t n, float* out) {
  for (size_t i = 0; i < n; i += 8) Store8(out + i, Load8(in + i));
}

LLAMA_V3
void WidenV3(const F16* in, size_t n, float* out) {
  for (size_t i = 0; i < n; i += 8) Store8(out + i, Load8(in + i));
}

LLAMA_V3
void WidenF16C(const F16* in, size_t n, float* out) {
  for (size_t i = 0; i < n; i += 8) Store8(out + i, Load8(reinterpret_cast<const F16Hw*>(in + i)));
}

TEST(SimdTest, F16WideningEqualsTheScalarConversionForEveryValue) {
  std::vector<F16> all(65536);
  for (uint32_t i = 0; i < all.size(); ++i) all[i].bits = static_cast<uint16_t>(i);
  std::vector<void (*)(const F16*, size_t, float*)> variants = {&WidenBaseline};
  const bool v3 = UseV3();  // The CPU runs x86-64-v3 code.
  if (v3) {
    variants.push_back(&WidenV3);
    variants.push_back(&WidenF16C);
  }
  std::printf("f16 widening variants checked: baseline%s\n", v3 ? ", x86-64-v3, F16C" : " (no x86-64-v3 here)");
  for (auto widen : variants) {
    std::vector<float> got(all.size());
    widen(all.data(), all.size(), got.data());
    for (uint32_t i = 0; i < all.size(); ++i) {
      const float want = F16ToF32(static_cast<uint16_t>(i));
      uint32_t got_bits, want_bits;
      std::memcpy(&got_bits, &got[i], 4);
      std::memcpy(&want_bits, &want, 4);
      // F16C quiets signalling NaNs (sets the top mantissa bit): still NaN.
      if (widen == &WidenF16C && std::isnan(want) && std::isnan(got[i])) continue;
      ASSERT_EQ(got_bits, want_bits) << "f16 bits 0x" << std::hex << i << " (variant " << (widen == &WidenBaseline ? "baseline" : widen == &WidenF16C ? "F16C" : "x86-64-v3")
          << ")";
    }
  }
}

// bf16 is the top half of an f32: both widenings must give exactly that,
// for every bit pattern (NaNs included: no instruction here quiets them).
void WidenBf16Baseline(const uint16_t* in, size_t n, float* out) {
  for (size_t i = 0; i < n; i += 8) Store8(out + i, Load8(in + i));
}

LLAMA_V3
void WidenBf16V3(const uint16_t* in, size_t n, float* out) {
  for (size_t i = 0; i < n; i += 8) Store8(out + i, Load8(reinterpret_cast<const Bf16Hw*>(in + i)));
}

void ExpBaseline(const float* in, size_t n, float* out) {
  for (size_t i = 0; i < n; i += 8) Store8(out + i, Exp(Load8(in + i)));
}

LLAMA_V3
void ExpV3(const float* in, size_t n, float* out) {
  for (size_t i = 0; i < n; i += 8) Store8(out + i, Exp(Load8(in + i)));
}

TEST(SimdTest, ExpIsWithinTwoUlpsAndClampsItsRange) {
  std::vector<float> x;
  for (double v = -87.0; v <= 88.0; v += 1.0 / 4096) x.push_back(static_cast<float>(v));
  for (float v : {0.0f, -0.0f, -87.0f, 88.0f, 88.7f, -1e-30f, 1e-30f}) x.push_back(v);
  const size_t checked = x.size();
  for (float v : {-87.01f, -100.0f, -1e30f, -__builtin_inff(), 88.8f, 1e30f}) x.push_back(v);
  while (x.size() % 8 != 0) x.push_back(0.0f);
  std::vector<float> got(x.size());
  for (const bool v3 : {false, true}) {
    if (v3 && !UseV3()) continue;  // The CPU does not run x86-64-v3 code.
    (v3 ? ExpV3 : ExpBaseline)(x.data(), x.size(), got.data());
    double worst = 0;
    for (size_t i = 0; i < checked; ++i) {
      const double exact = std::exp(static_cast<double>(x[i]));
      const double ulp = std::nextafter(static_cast<float>(exact), __builtin_inff()) - static_cast<float>(exact);
      worst = std::max(worst, std::abs(got[i] - exact) / ulp);
    }
    std::printf("Exp (%s): worst error %.2f ulp over %zu values\n", v3 ? "x86-64-v3" : "baseline", worst, checked);
    EXPECT_LE(worst, 2.0);
    for (size_t i = checked; i < checked + 6; ++i) {
      EXPECT_EQ(got[i], x[i] < 0 ? 0.0f : __builtin_inff()) << "x = " << x[i];
    }
  }
}

TEST(SimdTest, Bf16WideningIsExactForEveryValue) {
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<void (*)(const uint16_t*, size_t, float*)> variants = {&WidenBf16Baseline};
  if (UseV3()) variants.push_back(&WidenBf16V3);
  std::printf("bf16 widening variants checked: baseline%s\n", UseV3() ? ", x86-64-v3" : " (no x86-64-v3 here)");
  for (auto widen : variants) {
    std::vector<float> got(all.size());
    widen(all.data(), all.size(), got.data());
    for (uint32_t i = 0; i < all.size(); ++i) {
      uint32_t got_bits;
      std::memcpy(&got_bits, &got[i], 4);
      ASSERT_EQ(got_bits, i << 16) << "bf16 bits 0x" << std::hex << i;
    }
  }
}

// Sum4 adds each vector in Sum's order: the same bits as four Sums, over
// values whose sums round differently in every other order (magnitudes
// 2^-20 to 2^20, both signs).
TEST(SimdTest, Sum4EqualsFourSums) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  int differing_orders = 0;
  for (int trial = 0; trial < 10000; ++trial) {
    Float8 v[4];
    for (Float8& x : v) {
      for (int i = 0; i < 8; ++i) x[i] = std::ldexp(mantissa(rng), exponent(rng));
    }
    const Float8 four = Sum4(v[0], v[1], v[2], v[3]);
    for (int j = 0; j < 4; ++j) {
      ASSERT_EQ(four[j], Sum(v[j])) << "trial " << trial << ", vector " << j;
      float serial = 0;
      for (int i = 0; i < 8; ++i) serial += v[j][i];
      differing_orders += serial != Sum(v[j]);
    }
  }
  // The inputs do tell orders apart.
  EXPECT_GT(differing_orders, 1000);
}

}  // namespace
}  // namespace llama::cpu::simd

