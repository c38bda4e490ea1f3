#include "ops/cast.h"

#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_format.h"

namespace llama {
namespace {

// Every finite half survives f16 -> f32 -> f16, and the f32 value is exact
// (a half is an f32 with a shorter mantissa).
TEST(CastTest, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = F16ToF32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(F16ToF32(F32ToF16(f)))) << h;
      continue;
    }
    ASSERT_EQ(F32ToF16(f), h) << "half 0x" << std::hex << h << " -> " << f;
  }
  EXPECT_EQ(F16ToF32(0x3C00), 1.0f);
  EXPECT_EQ(F16ToF32(0x0001), std::ldexp(1.0f, -24));  // Smallest subnormal.
  EXPECT_EQ(F16ToF32(0x7BFF), 65504.0f);
}

// Halfway between two adjacent halves rounds to the even one; just above
// rounds up. Covers subnormals, normals and the overflow edge.
TEST(CastTest, F16RoundsToNearestEven) {
  for (uint32_t h = 0; h < 0x7BFF; ++h) {
    const float low = F16ToF32(static_cast<uint16_t>(h));
    const float high = F16ToF32(static_cast<uint16_t>(h + 1));
    const float mid = low + (high - low) / 2;  // Exact in f32.
    ASSERT_EQ(F32ToF16(mid), (h % 2 == 0) ? h : h + 1) << h;
    ASSERT_EQ(F32ToF16(std::nextafter(mid, high)), h + 1) << h;
    ASSERT_EQ(F32ToF16(std::nextafter(mid, low)), h) << h;
  }
  EXPECT_EQ(F32ToF16(65519.0f), 0x7BFF);
  EXPECT_EQ(F32ToF16(65520.0f), 0x7C00);  // Infinity.
  EXPECT_EQ(F32ToF16(-1e10f), 0xFC00);
  EXPECT_EQ(F32ToF16(std::ldexp(1.0f, -26)), 0);
}

TEST(CastTest, Bf16RoundsToNearestEven) {
  for (uint32_t b = 0; b < 0x7F7F; b += 7) {
    const float low = Bf16ToF32(static_cast<uint16_t>(b));
    const float high = Bf16ToF32(static_cast<uint16_t>(b + 1));
    EXPECT_EQ(F32ToBf16(low), b);
    const float mid = low + (high - low) / 2;
    ASSERT_EQ(F32ToBf16(mid), (b % 2 == 0) ? b : b + 1) << b;
  }
  EXPECT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(F32ToBf16(std::numeric_limits<float>::max()), 0x7F80);  // Rounds to infinity.
}

TEST(CastTest, CastElements) {
  const std::vector<float> values = {1.0f, -2.5f, 3.140625f};
  std::vector<uint16_t> bf16(3);
  ASSERT_TRUE(CastElements(values.data(), DType::kF32, bf16.data(), DType::kBF16, 3).ok());
  std::vector<float> back(3);
  ASSERT_TRUE(CastElements(bf16.data(), DType::kBF16, back.data(), DType::kF32, 3).ok());
  EXPECT_EQ(back, values);
  std::vector<uint16_t> f16(3);
  ASSERT_TRUE(CastElements(bf16.data(), DType::kBF16, f16.data(), DType::kF16, 3).ok());
  EXPECT_EQ(F16ToF32(f16[2]), 3.140625f);
  EXPECT_EQ(CastElements(values.data(), DType::kI64, back.data(), DType::kF32, 1).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CastTest, Float16Or32FlagsAcceptTheCastableTypesOnly) {
  EXPECT_EQ(*ParseFloat16Or32Flag("kv_cache_dtype", "bfloat16"), DType::kBF16);
  EXPECT_EQ(*ParseFloat16Or32Flag("kv_cache_dtype", "f16"), DType::kF16);
  EXPECT_EQ(*ParseFloat16Or32Flag("kv_cache_dtype", "fp32"), DType::kF32);
  for (const char* bad : {"int8", "f64", "q4", ""}) {
    const absl::StatusOr<DType> parsed = ParseFloat16Or32Flag("kv_cache_dtype", bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().message(), absl::StrFormat("--kv_cache_dtype=\"%s\": expected f32, bf16 or f16", bad));
  }
}

TEST(CastTest, WeightsDtypeFlagsAlsoAcceptInt8) {
  EXPECT_EQ(*ParseWeightsDtypeFlag("dtype", "int8"), DType::kQ8_0);
  EXPECT_EQ(*ParseWeightsDtypeFlag("dtype", "q8_0"), DType::kQ8_0);
  EXPECT_EQ(*ParseWeightsDtypeFlag("dtype", "bf16"), DType::kBF16);
  for (const char* bad : {"int4", "i8", "f64", ""}) {
    const absl::StatusOr<DType> parsed = ParseWeightsDtypeFlag("dtype", bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().message(), absl::StrFormat("--dtype=\"%s\": expected bf16, fp16, fp32, int8 or q4_k", bad));
  }
}

TEST(CastTest, FindNonFiniteNamesTheFirstNanOrInfinity) {
  std::vector<float> f32(1000, 1.5f);
  std::vector<uint16_t> f16(1000, F32ToF16(1.5f)), bf16(1000, F32ToBf16(1.5f));
  EXPECT_EQ(FindNonFinite(f32.data(), DType::kF32, f32.size()), -1);
  EXPECT_EQ(FindNonFinite(f16.data(), DType::kF16, f16.size()), -1);
  EXPECT_EQ(FindNonFinite(bf16.data(), DType::kBF16, bf16.size()), -1);
  f32[700] = std::numeric_limits<float>::infinity();
  f32[900] = std::nanf("");
  f16[513] = F32ToF16(1e6f);  // Overflows f16: infinity.
  bf16[3] = F32ToBf16(std::nanf(""));
  EXPECT_EQ(FindNonFinite(f32.data(), DType::kF32, f32.size()), 700);
  EXPECT_EQ(FindNonFinite(f16.data(), DType::kF16, f16.size()), 513);
  EXPECT_EQ(FindNonFinite(bf16.data(), DType::kBF16, bf16.size()), 3);
  // The largest finite values and subnormals are finite.
  const std::vector<uint16_t> edges = {0x7BFF, 0xFBFF, 0x0001, 0x8000};
  EXPECT_EQ(FindNonFinite(edges.data(), DType::kF16, edges.size()), -1);
  const std::vector<uint16_t> bf16_edges = {0x7F7F, 0xFF7F, 0x0001};
  EXPECT_EQ(FindNonFinite(bf16_edges.data(), DType::kBF16, bf16_edges.size()), -1);
}

}  // namespace
}  // namespace llama
