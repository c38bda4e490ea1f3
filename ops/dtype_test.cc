// Every dtype has its short name and parses back from it and from the long
// spellings; errors quote the value (the names moved from switches, which
// the compiler checked for every enum value, to a table this test checks).

#include "ops/dtype.h"

#include <gtest/gtest.h>

namespace llama {
namespace {

TEST(DTypeTest, EveryDTypeHasANameThatParsesBack) {
  for (int value = 1; IsKnownDType(value); ++value) {
    const DType dtype = static_cast<DType>(value);
    ASSERT_NE(DTypeName(dtype), "unknown") << value;
    const absl::StatusOr<DType> parsed = ParseDType(DTypeName(dtype));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, dtype);
  }
  EXPECT_EQ(DTypeName(static_cast<DType>(12)), "unknown");
}

TEST(DTypeTest, ParsesTheLongSpellings) {
  EXPECT_EQ(*ParseDType("fp32"), DType::kF32);
  EXPECT_EQ(*ParseDType("float16"), DType::kF16);
  EXPECT_EQ(*ParseDType("bfloat16"), DType::kBF16);
  EXPECT_EQ(*ParseDType("int8"), DType::kQ8_0);
  EXPECT_EQ(ParseDType("BF16").status(),
            absl::InvalidArgumentError("dtype \"BF16\": expected one of bf16, fp16, fp32, int8"));
}

TEST(DTypeTest, FlagErrorsNameTheFlag) {
  EXPECT_EQ(ParseFloat16Or32Flag("kv_dtype", "int8").status(),
            absl::InvalidArgumentError("--kv_dtype=\"int8\": expected f32, bf16 or f16"));
  EXPECT_EQ(ParseWeightsDtypeFlag("dtype", "i8").status(),
            absl::InvalidArgumentError("--dtype=\"i8\": expected bf16, fp16, fp32 or int8"));
  EXPECT_EQ(*ParseWeightsDtypeFlag("dtype", "int8"), DType::kQ8_0);
}

}  // namespace
}  // namespace llama
