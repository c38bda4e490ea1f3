#include "checkpoint/rank_geometry.h"

#include <gtest/gtest.h>

namespace llama {
namespace {

// Meta's params.json for Llama 2 70B, with the tokenizer's vocabulary.
ModelConfig Config70B() {
  absl::StatusOr<ModelConfig> c = ParseParamsJson(
      R"({"dim": 8192, "multiple_of": 4096, "ffn_dim_multiplier": 1.3, "n_heads": 64, "n_kv_heads": 8,
          "n_layers": 80, "norm_eps": 1e-05, "vocab_size": 32000})",
      "70B params.json");
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

TEST(RankGeometryTest, SplitsLikeFairscale) {
  const absl::StatusOr<RankGeometry> g = ComputeRankGeometry(Config70B(), 3, 8);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->head_dim, 128);
  EXPECT_EQ(g->local_heads, 8);
  EXPECT_EQ(g->local_kv_heads, 1);
  EXPECT_EQ(g->kv_head_begin, 3);
  EXPECT_EQ(g->local_hidden, 28672 / 8);
  EXPECT_EQ(g->local_dim, 1024);
  EXPECT_EQ(g->local_vocab, 4000);
  EXPECT_EQ(g->kv_head_of, std::vector<int32_t>(8, 0));
  EXPECT_EQ(g->q_width(), 1024);
  EXPECT_EQ(g->kv_width(), 128);
}

// Ranks outnumber KV heads: each rank holds the one head its queries read.
TEST(RankGeometryTest, ReplicatesKvHeadsWhenRanksOutnumberThem) {
  const ModelConfig c = *ParseParamsJson(
      R"({"dim": 64, "n_layers": 2, "n_heads": 8, "n_kv_heads": 2, "vocab_size": 96})", "small GQA params");
  for (int rank = 0; rank < 4; ++rank) {
    const absl::StatusOr<RankGeometry> g = ComputeRankGeometry(c, rank, 4);
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ(g->local_kv_heads, 1);
    EXPECT_EQ(g->kv_head_begin, rank / 2);
    EXPECT_EQ(g->kv_head_of, std::vector<int32_t>(2, 0));
  }
  const absl::StatusOr<RankGeometry> one = ComputeRankGeometry(c, 0, 1);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->kv_head_of, (std::vector<int32_t>{0, 0, 0, 0, 1, 1, 1, 1}));
}

TEST(RankGeometryTest, BadSplitsAreClearErrors) {
  ModelConfig c = Config70B();
  EXPECT_FALSE(ComputeRankGeometry(c, 0, 3).ok());
  EXPECT_EQ(ComputeRankGeometry(c, 8, 8).status().message(), "rank 8 outside [0, 8)");
  c.vocab_size = -1;
  EXPECT_EQ(ComputeRankGeometry(c, 0, 1).status().message(),
            "model config: vocab_size -1; expected the tokenizer's size");
}

}  // namespace
}  // namespace llama
