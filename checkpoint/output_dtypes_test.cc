#include "checkpoint/output_dtypes.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace llama {
namespace {

using ::testing::HasSubstr;

TEST(CheckWholeBlocksTest, AcceptsWholeBlocksAndTypesWithoutBlocks) {
  EXPECT_TRUE(CheckWholeBlocks(DType::kQ4_K, DType::kQ4_K, "layers.0.attention.wq.weight", {64, 512}, 2).ok());
  EXPECT_TRUE(CheckWholeBlocks(DType::kQ8_0, DType::kQ8_0, "layers.0.attention.wq.weight", {64, 96}, 2).ok());
  EXPECT_TRUE(CheckWholeBlocks(DType::kBF16, DType::kBF16, "layers.0.attention.wq.weight", {64, 7}, 3).ok());
}

TEST(CheckWholeBlocksTest, NamesTheFlagAsTypedAndTheTypeWrittenWhereTheyDiffer) {
  const absl::Status int8 = CheckWholeBlocks(DType::kQ8_0, DType::kQ8_0, "layers.0.attention.wo.weight", {64, 48}, 2);
  EXPECT_EQ(int8.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(int8.message(), HasSubstr("--dtype=int8: tensor \"layers.0.attention.wo.weight\" has rows of 48 values "
                                        "on each of 2 ranks; int8 blocks need a multiple of 32"));
  // --dtype=q4_k writes the output projection q6_k (llama.cpp's Q4_K_M mix).
  const absl::Status mix = CheckWholeBlocks(DType::kQ4_K, DType::kQ6_K, "output.weight", {32000, 128}, 2);
  EXPECT_THAT(mix.message(), HasSubstr("--dtype=q4_k: tensor \"output.weight\" (written q6_k) has rows of 128 values "
                                       "on each of 2 ranks; q6_k blocks need a multiple of 256"));
  // No --dtype: the source's type, kept; no flag named.
  const absl::Status kept = CheckWholeBlocks(std::nullopt, DType::kQ6_K, "output.weight", {32000, 128}, 2);
  EXPECT_EQ(kept.message().substr(0, 7), "tensor ");
  EXPECT_THAT(kept.message(), HasSubstr("tensor \"output.weight\" (kept q6_k) has rows of 128 values"));
}

}  // namespace
}  // namespace llama
