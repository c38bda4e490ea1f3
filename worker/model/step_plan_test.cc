#include "worker/model/step_plan.h"

#include <gtest/gtest.h>

namespace llama {
namespace {

// Blocks of 4 positions, 16 per sequence: tables of 4 entries.
const ModelLimits kLimits{/*vocab_size=*/100, /*max_batch_size=*/4, /*max_seq_len=*/16, /*max_step_tokens=*/8,
                          /*kv_block_size=*/4, /*kv_blocks=*/10};

TEST(StepPlanTest, PlansTokensPositionsTablesAndLogitRows) {
  const std::vector<int> prompt = {5, 6, 7}, next = {9}, scored = {1, 2};
  const std::vector<int32_t> t0 = {7}, t1 = {3, 1, 9}, t2 = {4, 5, 6, 8};
  const std::vector<SequenceChunk> chunks = {{t0, 0, prompt, false}, {t1, 10, next, false}, {t2, 4, scored, true}};
  StepPlan plan;
  ASSERT_TRUE(PlanStep(chunks, kLimits, plan).ok());
  EXPECT_EQ(plan.tokens, (std::vector<int32_t>{5, 6, 7, 9, 1, 2}));
  EXPECT_EQ(plan.positions, (std::vector<int32_t>{0, 1, 2, 10, 4, 5}));
  EXPECT_EQ(plan.table_of, (std::vector<int32_t>{0, 0, 0, 1, 2, 2}));
  // Each table holds what its chunk reaches, padded to the stride.
  EXPECT_EQ(plan.table_stride, 4);
  EXPECT_EQ(plan.block_tables, (std::vector<int32_t>{7, 0, 0, 0, 3, 1, 9, 0, 4, 5, 0, 0}));
  EXPECT_EQ(CacheRowOf(plan.table(1), plan.block_size, 10), 9 * 4 + 2);
  EXPECT_EQ(plan.logit_rows, (std::vector<int32_t>{2, 3, 4, 5}));
  ASSERT_EQ(plan.chunks.size(), 3u);
  EXPECT_EQ(plan.chunks[2].first_row, 4);
  EXPECT_EQ(plan.chunks[2].len, 2);
  EXPECT_FALSE(plan.decode_only);
  EXPECT_EQ(plan.n(), 6);
  EXPECT_EQ(plan.rows(), 4);

  // Reused: a decode step replaces everything.
  const std::vector<int> a = {1}, b = {2};
  ASSERT_TRUE(PlanStep({{t0, 3, a, false}, {t1, 7, b, false}}, kLimits, plan).ok());
  EXPECT_TRUE(plan.decode_only);
  EXPECT_EQ(plan.logit_rows, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(plan.block_tables, (std::vector<int32_t>{7, 0, 0, 0, 3, 1, 0, 0}));
  EXPECT_EQ(plan.chunks.size(), 2u);
}

TEST(StepPlanTest, BadChunksNameTheChunkAndTheLimit) {
  const std::vector<int> one = {1}, bad_token = {1, 100}, nine(9, 1), two = {1, 2};
  const std::vector<int32_t> table = {0, 1, 2, 3}, bad_block = {10}, short_table = {0};
  StepPlan plan;
  EXPECT_EQ(PlanStep({{table, 0, one, false}, {bad_block, 0, one, false}}, kLimits, plan).message(),
            "chunk 1: KV block 10 outside the cache's [0, 10)");
  EXPECT_EQ(PlanStep({{short_table, 3, two, false}}, kLimits, plan).message(),
            "chunk 0: a block table of 1 blocks for positions up to 5; 2 blocks of 4 positions needed");
  EXPECT_EQ(PlanStep({{table, 16, one, false}}, kLimits, plan).message(),
            "chunk 0: positions [16, 17) do not fit max_seq_len 16");
  EXPECT_EQ(PlanStep({{table, 0, {}, false}}, kLimits, plan).message(),
            "chunk 0: positions [0, 0) do not fit max_seq_len 16");
  EXPECT_EQ(PlanStep({{table, 0, bad_token, false}}, kLimits, plan).message(),
            "chunk 0: token id 100 outside the vocabulary [0, 100)");
  EXPECT_EQ(PlanStep({{table, 0, nine, false}}, kLimits, plan).message(), "9 tokens in one step; at most 8");
  const std::vector<SequenceChunk> five(5, {table, 0, one, false});
  EXPECT_EQ(PlanStep(five, kLimits, plan).message(), "5 sequences in one step; at most 4");
}

}  // namespace
}  // namespace llama
