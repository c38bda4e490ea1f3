#include "checkpoint/llama_layout.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"

namespace llama {
namespace {

ModelConfig Gqa() {
  ModelConfig c =
      ModelShape(/*dim=*/64, /*n_layers=*/2, /*n_heads=*/8, /*n_kv_heads=*/2, /*vocab_size=*/96, /*multiple_of=*/16);
  c.ffn_dim_multiplier = 1.3;
  return c;
}

TEST(LlamaLayoutTest, NamesAndShapes) {
  const std::vector<TensorSpec> specs = LlamaTensors(Gqa());
  ASSERT_EQ(specs.size(), 1 + 2 * 9 + 2u);
  EXPECT_EQ(specs[0].name, "tok_embeddings.weight");
  EXPECT_EQ(specs[0].split_dim(), 1);
  EXPECT_EQ(specs[2].name, "layers.0.attention.wk.weight");
  EXPECT_EQ(specs[2].shape, (std::vector<int64_t>{16, 64}));
  EXPECT_EQ(specs[5].name, "layers.0.feed_forward.w1.weight");
  EXPECT_EQ(specs[5].shape, (std::vector<int64_t>{Gqa().ffn_hidden_dim(), 64}));
  EXPECT_EQ(specs.back().name, "output.weight");
  EXPECT_EQ(specs.back().split_dim(), 0);
}

// Every rank of several world sizes, against the formulas in llama_layout.h.
TEST(LlamaLayoutTest, RankSlicesTileOrReplicate) {
  const ModelConfig c = Gqa();
  for (const TensorSpec& spec : LlamaTensors(c)) {
    for (int ws : {1, 2, 4, 8}) {
      int64_t covered = 0;
      for (int r = 0; r < ws; ++r) {
        const DimRange range = RankSlice(spec, c, r, ws);
        if (spec.split == SplitKind::kKvColumn && ws > c.n_kv_heads) {
          const int64_t head = r * c.n_kv_heads / ws;
          EXPECT_EQ(range.begin, head * c.head_dim()) << spec.name << " ws=" << ws << " r=" << r;
          // The KV head must be the one this rank's query heads use.
          const int64_t first_query_head = r * (c.n_heads / ws);
          EXPECT_EQ(head, first_query_head / (c.n_heads / c.n_kv_heads));
          continue;
        }
        if (spec.split_dim() >= 0) {
          EXPECT_EQ(range.begin, covered) << spec.name;
          covered = range.end;
        }
      }
      if (spec.split_dim() >= 0 && !(spec.split == SplitKind::kKvColumn && ws > c.n_kv_heads)) {
        EXPECT_EQ(covered, spec.shape[spec.split_dim()]) << spec.name << " ws=" << ws;
      }
    }
  }
  const TensorSpec wo = LlamaTensors(c)[4];
  EXPECT_EQ(RankShape(wo, c, 1, 4), (std::vector<int64_t>{64, 16}));
}

TEST(LlamaLayoutTest, ParsesEachNamingsLayerPrefix) {
  const std::optional<LayerTensorName> meta = ParseLayerName("layers.12.attention.wq.weight", TensorNaming::kMeta);
  ASSERT_TRUE(meta.has_value());
  EXPECT_EQ(meta->layer, 12);
  EXPECT_EQ(meta->name, "attention.wq.weight");
  const std::optional<LayerTensorName> hf = ParseLayerName("model.layers.3.mlp.up_proj.weight", TensorNaming::kHuggingFace);
  ASSERT_TRUE(hf.has_value());
  EXPECT_EQ(hf->layer, 3);
  EXPECT_EQ(hf->name, "mlp.up_proj.weight");
  EXPECT_EQ(ParseLayerName("blk.0.attn_q.weight", TensorNaming::kGguf)->layer, 0);
  for (const char* name : {"norm.weight", "layers.x.attention.wq.weight", "layers.-1.attention.wq.weight", "layers.3"}) {
    EXPECT_FALSE(ParseLayerName(name, TensorNaming::kMeta).has_value()) << name;
  }
  EXPECT_FALSE(ParseLayerName("layers.3.attention.wq.weight", TensorNaming::kHuggingFace).has_value());
}

TEST(LlamaLayoutTest, RenamesBetweenNamings) {
  EXPECT_EQ(*RenameTensor("model.layers.1.mlp.down_proj.weight", TensorNaming::kHuggingFace, TensorNaming::kMeta),
            "layers.1.feed_forward.w2.weight");
  EXPECT_EQ(*RenameTensor("lm_head.weight", TensorNaming::kHuggingFace, TensorNaming::kMeta), "output.weight");
  EXPECT_EQ(*RenameTensor("layers.7.ffn_norm.weight", TensorNaming::kMeta, TensorNaming::kGguf),
            "blk.7.ffn_norm.weight");
  EXPECT_EQ(*RenameTensor("tok_embeddings.weight", TensorNaming::kMeta, TensorNaming::kGguf), "token_embd.weight");
  EXPECT_FALSE(RenameTensor("layers.7.attention.wz.weight", TensorNaming::kMeta, TensorNaming::kGguf).has_value());
  EXPECT_FALSE(RenameTensor(kRopeFreqsName, TensorNaming::kMeta, TensorNaming::kGguf).has_value());
  // Every tensor of a model survives a round trip through each naming.
  for (const TensorSpec& spec : LlamaTensors(Gqa())) {
    for (TensorNaming naming : {TensorNaming::kHuggingFace, TensorNaming::kGguf}) {
      const std::optional<std::string> theirs = RenameTensor(spec.name, TensorNaming::kMeta, naming);
      ASSERT_TRUE(theirs.has_value()) << spec.name;
      EXPECT_EQ(RenameTensor(*theirs, naming, TensorNaming::kMeta), spec.name);
    }
  }
}

TEST(LlamaLayoutTest, SpecsPointAtTheirKind) {
  for (const TensorSpec& spec : LlamaTensors(Gqa())) {
    ASSERT_NE(spec.kind, nullptr) << spec.name;
    EXPECT_EQ(spec.split, spec.kind->split);
    EXPECT_EQ(spec.shape.size(), spec.kind->shape.size());
    EXPECT_EQ(spec.kind->rotary_rows, absl::EndsWith(spec.name, "wq.weight") || absl::EndsWith(spec.name, "wk.weight"));
  }
}

}  // namespace
}  // namespace llama
