#include "worker/model/rank_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "checkpoint/model_config.h"
#include "worker/model/synthetic_weights.h"

namespace llama {
namespace {

using ::testing::HasSubstr;

// Meta's params.json for Llama 2 70B, with the tokenizer's vocabulary.
ModelConfig Config70B() {
  absl::StatusOr<ModelConfig> c = ParseParamsJson(
      R"({"dim": 8192, "multiple_of": 4096, "ffn_dim_multiplier": 1.3, "n_heads": 64, "n_kv_heads": 8,
          "n_layers": 80, "norm_eps": 1e-05, "vocab_size": 32000})",
      "70B params.json");
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

ModelConfig TinyConfig() {
  return ModelShape(/*dim=*/32, /*n_layers=*/2, /*n_heads=*/4, /*n_kv_heads=*/2, /*vocab_size=*/40, /*multiple_of=*/16);
}

TEST(RankPlanTest, SizesA70BRankLikeItsTensors) {
  const absl::StatusOr<RankGeometry> g = ComputeRankGeometry(Config70B(), 3, 8);
  ASSERT_TRUE(g.ok()) << g.status();
  // 70B is ~69e9 parameters: one eighth in bf16 is ~17.2 GB per rank.
  EXPECT_NEAR(WeightBytes(*g, DType::kBF16) / 1e9, 69e9 * 2 / 8 / 1e9, 0.2);
  EXPECT_DOUBLE_EQ(EmbeddingBytes(*g, DType::kBF16), 32000.0 * 1024 * 2);
  EXPECT_DOUBLE_EQ(KvCacheBytes(*g, 4 * 1024, DType::kBF16), 2.0 * 80 * 4 * 1024 * 128 * 2);
}

TEST(RankPlanTest, ResolvesEveryDefault) {
  const ModelWeights weights = *SyntheticWeights(TinyConfig(), DType::kF32);
  TransformerOptions options;
  options.max_batch_size = 3;
  options.max_seq_len = 40;
  options.kv_block_size = 16;
  options.max_step_tokens = 64;
  const absl::StatusOr<RankPlan> plan = PlanRank(weights, 0, 1, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->limits.vocab_size, 40);
  EXPECT_EQ(plan->limits.blocks_per_sequence(), 3);  // 40 positions in blocks of 16.
  EXPECT_EQ(plan->limits.kv_blocks, 3 * 3);          // max_batch_size sequences of max_seq_len.
  EXPECT_GT(plan->threads, 0);

  options.kv_blocks = 7;
  EXPECT_EQ(PlanRank(weights, 0, 1, options)->limits.kv_blocks, 7);
  options.kv_blocks = 0;
  // Bytes hold whole blocks: 2 layers x (k, v) x 16 positions x 16 floats.
  const double block_bytes = 2.0 * 2 * 16 * 16 * 4;
  options.kv_cache_bytes = 5.5 * block_bytes;
  EXPECT_EQ(PlanRank(weights, 0, 1, options)->limits.kv_blocks, 5);
}

TEST(RankPlanTest, ACacheThatCannotHoldOneSequenceIsAClearError) {
  const ModelWeights weights = *SyntheticWeights(TinyConfig(), DType::kF32);
  TransformerOptions options;
  options.max_seq_len = 64;
  options.kv_blocks = 3;  // 64 positions take 4 blocks of 16.
  const absl::StatusOr<RankPlan> plan = PlanRank(weights, 0, 1, options);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(plan.status().message(), HasSubstr("cannot hold one sequence of --max_seq_len=64 (4 blocks)"));
  RankPlan fits = *PlanRank(weights, 0, 1, TransformerOptions{});
  EXPECT_FALSE(SetKvBlocks(fits, fits.limits.blocks_per_sequence() - 1).ok());
  EXPECT_TRUE(SetKvBlocks(fits, fits.limits.blocks_per_sequence()).ok());
}

TEST(RankPlanTest, ChecksTheShardAgainstTheRank) {
  const ModelWeights weights = *SyntheticWeights(TinyConfig(), DType::kF32, 1, /*rank=*/1, /*world_size=*/2);
  EXPECT_THAT(PlanRank(weights, 0, 2, TransformerOptions{}).status().message(),
              HasSubstr("the shard is for rank 1 of 2 but this process is rank 0 of 2"));
  EXPECT_TRUE(PlanRank(weights, 1, 2, TransformerOptions{}).ok());
}

// The device list is the host's plus the sampler's probabilities, and the
// estimate counts exactly the buffers the backends allocate.
TEST(RankPlanTest, WorkBytesCountTheWorkBufferList) {
  const RankPlan plan = *PlanRank(*SyntheticWeights(TinyConfig(), DType::kF32), 0, 1, TransformerOptions{});
  const std::vector<WorkBuffer> host = WorkBuffers(plan.geometry, Sampling::kOnHost);
  const std::vector<WorkBuffer> device = WorkBuffers(plan.geometry, Sampling::kOnDevice);
  ASSERT_EQ(device.size(), host.size() + 1);
  EXPECT_EQ(device.back().member, &Activations::probabilities);
  double widths = 0;
  for (const WorkBuffer& b : host) widths += b.width;
  EXPECT_DOUBLE_EQ(WorkBytes(plan, Sampling::kOnHost), widths * plan.limits.max_step_tokens * sizeof(float));
  EXPECT_DOUBLE_EQ(WorkBytes(plan, Sampling::kOnDevice) - WorkBytes(plan, Sampling::kOnHost),
                   40.0 * plan.limits.max_step_tokens * sizeof(float));
}

}  // namespace
}  // namespace llama
