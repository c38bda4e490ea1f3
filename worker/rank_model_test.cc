#include "worker/rank_model.h"

#include <gtest/gtest.h>

#include "worker/model/synthetic_weights.h"

namespace llama {
namespace {

ModelConfig Small() {
  return ModelShape(/*dim=*/64, /*n_layers=*/2, /*n_heads=*/4, /*n_kv_heads=*/4, /*vocab_size=*/96, /*multiple_of=*/32);
}

absl::StatusOr<RankPlan> TryPlan(const ModelConfig& config, const JobFlags& flags) {
  absl::StatusOr<ModelWeights> weights = SyntheticWeights(config, DType::kF32);
  EXPECT_TRUE(weights.ok()) << weights.status();
  RendezvousOptions alone;
  alone.world_size = 1;
  absl::StatusOr<RankPeers> peers = JoinPeers(alone, 0);
  EXPECT_TRUE(peers.ok()) << peers.status();
  return PlanRankModel(flags, *weights, Device::kCpu, *peers, 1);
}

RankPlan Plan(const ModelConfig& config, const JobFlags& flags) {
  absl::StatusOr<RankPlan> plan = TryPlan(config, flags);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : RankPlan{};
}

// Without --max_seq_len the context is the model's own (params.json gives
// none: Llama 2's 4096), with a KV cache of --max_batch_size such sequences.
TEST(RankModelTest, TheDefaultContextIsTheModelsOwn) {
  JobFlags flags;
  ASSERT_EQ(flags.max_seq_len, 0);
  const RankPlan plan = Plan(Small(), flags);
  EXPECT_EQ(plan.limits.max_seq_len, 4096);
  EXPECT_EQ(plan.limits.kv_blocks, flags.max_batch_size * plan.limits.blocks_per_sequence());
  ModelConfig given = Small();
  given.max_seq_len = 2048;  // config.json's max_position_embeddings.
  EXPECT_EQ(Plan(given, flags).limits.max_seq_len, 2048);
}

// A model whose own context would not fit: the KV cache takes 90% of the
// free memory, and the context is what that holds.
TEST(RankModelTest, AnOwnContextPastFreeMemoryIsWhatTheCacheHolds) {
  ModelConfig huge = Small();
  huge.max_seq_len = int64_t{1} << 40;  // A petabyte of KV cache per sequence at this width.
  const RankPlan plan = Plan(huge, JobFlags());
  EXPECT_LT(plan.limits.max_seq_len, huge.max_seq_len);
  EXPECT_GE(plan.limits.max_seq_len, 2);
  EXPECT_LE(KvCacheBytes(plan), 0.9 * AvailableHostMemoryBytes());
  EXPECT_GE(plan.limits.kv_blocks, plan.limits.blocks_per_sequence());
}

TEST(RankModelTest, AGivenContextAndCacheAreKept) {
  JobFlags flags;
  flags.max_seq_len = 100;
  RankPlan plan = Plan(Small(), flags);
  EXPECT_EQ(plan.limits.max_seq_len, 100);
  EXPECT_EQ(plan.limits.kv_blocks, flags.max_batch_size * plan.limits.blocks_per_sequence());
  // A cache the user sized is kept; the model's own context is then what
  // it holds, and a context the user gave that it cannot hold is an error.
  flags.max_seq_len = 0;
  flags.kv_cache_gb = 0.001;  // 1 MB: 61 blocks of 16 positions at 1 kB a position.
  plan = Plan(Small(), flags);
  EXPECT_EQ(plan.limits.kv_blocks, 61);
  EXPECT_EQ(plan.limits.max_seq_len, 61 * 16);
  flags.max_seq_len = 4096;
  const absl::StatusOr<RankPlan> small = TryPlan(Small(), flags);
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.status().message().find("cannot hold one sequence of --max_seq_len=4096"), std::string::npos)
      << small.status();
}

}  // namespace
}  // namespace llama
