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
  EXPECT_EQ(DTypeName(static_cast<DType>(14)), "unknown");
}

TEST(DTypeTest, ParsesTheLongSpellings) {
  EXPECT_EQ(*ParseDType("fp32"), DType::kF32);
  EXPECT_EQ(*ParseDType("float16"), DType::kF16);
  EXPECT_EQ(*ParseDType("bfloat16"), DType::kBF16);
  EXPECT_EQ(*ParseDType("int8"), DType::kQ8_0);
  EXPECT_EQ(ParseDType("BF16").status(),
            absl::InvalidArgumentError("dtype \"BF16\": expected one of bf16, fp16, fp32, int8, q4_k, q6_k"));
}

TEST(DTypeTest, FlagErrorsNameTheFlag) {
  EXPECT_EQ(ParseFloat16Or32Flag("kv_dtype", "int8").status(),
            absl::InvalidArgumentError("--kv_dtype=\"int8\": expected f32, bf16 or f16"));
  EXPECT_EQ(ParseWeightsDtypeFlag("dtype", "i8").status(),
            absl::InvalidArgumentError("--dtype=\"i8\": expected bf16, fp16, fp32, int8 or q4_k"));
  EXPECT_EQ(*ParseWeightsDtypeFlag("dtype", "int8"), DType::kQ8_0);
  EXPECT_EQ(*ParseWeightsDtypeFlag("dtype", "q4_k"), DType::kQ4_K);
  // q6_k comes with a GGUF's Q4_K_M, not asked for.
  EXPECT_EQ(ParseWeightsDtypeFlag("dtype", "q6_k").status(),
            absl::InvalidArgumentError("--dtype=\"q6_k\": expected bf16, fp16, fp32, int8 or q4_k"));
}

TEST(DTypeTest, BlockTypesCountWholeBlocks) {
  EXPECT_TRUE(IsBlockDType(DType::kQ8_0));
  EXPECT_TRUE(IsBlockDType(DType::kQ4_K));
  EXPECT_FALSE(IsBlockDType(DType::kBF16));
  EXPECT_EQ(BlockElements(DType::kQ4_K), 256);
  EXPECT_EQ(BlockElements(DType::kF16), 1);
  // Q4_K: 4.5 bits a weight, as ggml stores it.
  EXPECT_EQ(TensorBytes(DType::kQ4_K, 4096 * 256), 4096u * 144);
  // Q6_K: 6.5625 bits a weight.
  EXPECT_TRUE(IsBlockDType(DType::kQ6_K));
  EXPECT_EQ(BlockElements(DType::kQ6_K), 256);
  EXPECT_EQ(TensorBytes(DType::kQ6_K, 4096 * 256), 4096u * 210);
  EXPECT_EQ(TensorBytes(DType::kQ8_0, 64), 68u);
}

}  // namespace
}  // namespace llama
