#include "checkpoint/gguf_llama.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tokenizer/tokenizer_fixture.h"

namespace llama {
namespace {

using ::testing::HasSubstr;

ModelConfig ConfigFor(const Tokenizer& tokenizer) {
  ModelConfig config;
  config.dim = 64;
  config.n_layers = 2;
  config.n_heads = 4;
  config.n_kv_heads = 2;
  config.vocab_size = tokenizer.vocab_size();
  return config;
}

TEST(GgufTensorNameTest, MapsOurNamesToLlamaCpps) {
  EXPECT_EQ(*GgufTensorName("tok_embeddings.weight"), "token_embd.weight");
  EXPECT_EQ(*GgufTensorName("norm.weight"), "output_norm.weight");
  EXPECT_EQ(*GgufTensorName("layers.11.attention.wq.weight"), "blk.11.attn_q.weight");
  EXPECT_EQ(*GgufTensorName("layers.0.feed_forward.w2.weight"), "blk.0.ffn_down.weight");
}

TEST(GgufTensorNameTest, RefusesNamesItDoesNotKnow) {
  for (const char* name : {"layers.x.attention.wq.weight", "layers.3.attention.wz.weight", "rope.freqs"}) {
    absl::StatusOr<std::string> gguf = GgufTensorName(name);
    ASSERT_FALSE(gguf.ok()) << name;
    EXPECT_THAT(gguf.status().message(), HasSubstr(absl::StrCat("no GGUF name for tensor \"", name, "\"")));
  }
}

TEST(LlamaGgufMetadataTest, RefusesAVocabularyOfAnotherSize) {
  const Tokenizer& tokenizer = testing::FixtureTokenizer();
  ModelConfig config = ConfigFor(tokenizer);
  config.vocab_size += 1;
  absl::StatusOr<GgufMetadata> m = LlamaGgufMetadata(config, tokenizer, "tiny", DType::kBF16);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("but the model's vocabulary is"));
}

TEST(LlamaGgufMetadataTest, RefusesWeightTypesLlamaCppHasNoFileTypeFor) {
  const Tokenizer& tokenizer = testing::FixtureTokenizer();
  for (DType weights : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0}) {
    EXPECT_TRUE(LlamaGgufMetadata(ConfigFor(tokenizer), tokenizer, "tiny", weights).ok()) << DTypeName(weights);
  }
  absl::StatusOr<GgufMetadata> m = LlamaGgufMetadata(ConfigFor(tokenizer), tokenizer, "tiny", DType::kF64);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("GGUF weights must be f32, f16, bf16, q8_0 or q4_k, not f64"));
}

}  // namespace
}  // namespace llama
