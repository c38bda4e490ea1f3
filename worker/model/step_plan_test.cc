#include "worker/model/step_plan.h"

#include <gtest/gtest.h>

namespace llama {
namespace {

const StepLimits kLimits{/*max_batch_size=*/4, /*max_seq_len=*/16, /*max_step_tokens=*/8, /*vocab_size=*/100};

TEST(StepPlanTest, PlansTokensPositionsSlotsAndLogitRows) {
  const std::vector<int> prompt = {5, 6, 7}, next = {9}, scored = {1, 2};
  const std::vector<SequenceChunk> chunks = {{2, 0, prompt, false}, {0, 10, next, false}, {3, 4, scored, true}};
  StepPlan plan;
  ASSERT_TRUE(PlanStep(chunks, kLimits, plan).ok());
  EXPECT_EQ(plan.tokens, (std::vector<int32_t>{5, 6, 7, 9, 1, 2}));
  EXPECT_EQ(plan.positions, (std::vector<int32_t>{0, 1, 2, 10, 4, 5}));
  EXPECT_EQ(plan.slots, (std::vector<int32_t>{2, 2, 2, 0, 3, 3}));
  EXPECT_EQ(plan.logit_rows, (std::vector<int32_t>{2, 3, 4, 5}));
  ASSERT_EQ(plan.chunks.size(), 3u);
  EXPECT_EQ(plan.chunks[2].first_row, 4);
  EXPECT_EQ(plan.chunks[2].len, 2);
  EXPECT_FALSE(plan.decode_only);
  EXPECT_EQ(plan.n(), 6);
  EXPECT_EQ(plan.rows(), 4);

  // Reused: a decode step replaces everything.
  const std::vector<int> a = {1}, b = {2};
  ASSERT_TRUE(PlanStep({{0, 3, a, false}, {1, 7, b, false}}, kLimits, plan).ok());
  EXPECT_TRUE(plan.decode_only);
  EXPECT_EQ(plan.logit_rows, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(plan.chunks.size(), 2u);
}

TEST(StepPlanTest, BadChunksNameTheChunkAndTheLimit) {
  const std::vector<int> one = {1}, bad_token = {1, 100}, nine(9, 1);
  StepPlan plan;
  EXPECT_EQ(PlanStep({{0, 0, one, false}, {4, 0, one, false}}, kLimits, plan).message(),
            "chunk 1: KV slot 4 outside [0, 4)");
  EXPECT_EQ(PlanStep({{0, 16, one, false}}, kLimits, plan).message(),
            "chunk 0: positions [16, 17) do not fit max_seq_len 16");
  EXPECT_EQ(PlanStep({{0, 0, {}, false}}, kLimits, plan).message(),
            "chunk 0: positions [0, 0) do not fit max_seq_len 16");
  EXPECT_EQ(PlanStep({{1, 0, bad_token, false}}, kLimits, plan).message(),
            "chunk 0: token id 100 outside the vocabulary [0, 100)");
  EXPECT_EQ(PlanStep({{1, 0, nine, false}}, kLimits, plan).message(), "9 tokens in one step; at most 8");
}

}  // namespace
}  // namespace llama
