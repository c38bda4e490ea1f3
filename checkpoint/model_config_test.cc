#include "checkpoint/model_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace llama {
namespace {

using ::testing::HasSubstr;

TEST(ModelConfigTest, Llama2Sizes) {
  // Meta's params.json files, verbatim.
  absl::StatusOr<ModelConfig> b7 = ParseParamsJson(
      R"({"dim": 4096, "multiple_of": 256, "n_heads": 32, "n_layers": 32, "norm_eps": 1e-05, "vocab_size": -1})",
      "7b");
  ASSERT_TRUE(b7.ok()) << b7.status();
  EXPECT_EQ(b7->head_dim(), 128);
  EXPECT_EQ(b7->ffn_hidden_dim(), 11008);
  EXPECT_EQ(b7->n_kv_heads, 32);
  EXPECT_EQ(b7->vocab_size, -1);
  EXPECT_EQ(b7->rope_theta, 10000.0);
  absl::StatusOr<ModelConfig> b13 = ParseParamsJson(
      R"({"dim": 5120, "multiple_of": 256, "n_heads": 40, "n_layers": 40, "norm_eps": 1e-05, "vocab_size": -1})",
      "13b");
  ASSERT_TRUE(b13.ok()) << b13.status();
  EXPECT_EQ(b13->ffn_hidden_dim(), 13824);
  absl::StatusOr<ModelConfig> b70 = ParseParamsJson(
      R"({"dim": 8192, "multiple_of": 4096, "ffn_dim_multiplier": 1.3, "n_heads": 64, "n_kv_heads": 8,
          "n_layers": 80, "norm_eps": 1e-05, "vocab_size": -1})",
      "70b");
  ASSERT_TRUE(b70.ok()) << b70.status();
  EXPECT_EQ(b70->ffn_hidden_dim(), 28672);
  EXPECT_EQ(b70->n_kv_heads, 8);
  for (int ws : {1, 2, 4, 8}) EXPECT_TRUE(CheckWorldSize(*b70, ws).ok()) << ws;
  EXPECT_TRUE(CheckWorldSize(*b70, 16).ok());  // KV heads replicated 2x.
  EXPECT_THAT(CheckWorldSize(*b70, 3).message(), HasSubstr("world size 3 does not divide n_heads (64)"));
  EXPECT_THAT(CheckWorldSize(*b7, 0).message(), HasSubstr("expected at least 1"));
}

// Meta's params.json files give no context length: each family's own.
TEST(ModelConfigTest, ContextLengthIsTheModelsOwn) {
  const char* llama2 = R"({"dim": 4096, "multiple_of": 256, "n_heads": 32, "n_layers": 32, "norm_eps": 1e-05,
                           "vocab_size": -1})";
  const char* llama3 = R"({"dim": 4096, "n_layers": 32, "n_heads": 32, "n_kv_heads": 8, "vocab_size": 128256,
                           "multiple_of": 1024, "ffn_dim_multiplier": 1.3, "norm_eps": 1e-05, "rope_theta": 500000.0})";
  const char* llama31 = R"({"dim": 4096, "n_layers": 32, "n_heads": 32, "n_kv_heads": 8, "vocab_size": 128256,
                            "multiple_of": 1024, "ffn_dim_multiplier": 1.3, "norm_eps": 1e-05, "rope_theta": 500000.0,
                            "use_scaled_rope": true})";
  EXPECT_EQ(ParseParamsJson(llama2, "2")->context_length(), 4096);
  EXPECT_EQ(ParseParamsJson(llama3, "3")->context_length(), 8192);
  EXPECT_EQ(ParseParamsJson(llama31, "3.1")->context_length(), 131072);
  ModelConfig given = *ParseParamsJson(llama2, "2");
  given.max_seq_len = 2048;  // params.json's max_seq_len or config.json's max_position_embeddings.
  EXPECT_EQ(given.context_length(), 2048);
}

TEST(ModelConfigTest, OptionalFields) {
  absl::StatusOr<ModelConfig> c = ParseParamsJson(
      R"({"dim": 64, "n_layers": 2, "n_heads": 8, "n_kv_heads": 2, "rope_theta": 500000.0,
          "norm_eps": 1e-6, "max_seq_len": 512, "vocab_size": 96})",
      "p");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rope_theta, 500000.0);
  EXPECT_EQ(c->norm_eps, 1e-6);
  EXPECT_EQ(c->max_seq_len, 512);
  EXPECT_EQ(c->vocab_size, 96);
  EXPECT_EQ(c->multiple_of, 256);
}

TEST(ModelConfigTest, ErrorsNameFileAndField) {
  struct Case {
    const char* json;
    const char* expected;
  };
  const Case cases[] = {
      {R"({"n_layers": 2, "n_heads": 4})", "p.json: field \"dim\": missing; expected an integer"},
      {R"({"dim": "64", "n_layers": 2, "n_heads": 4})", "field \"dim\": is \"64\"; expected an integer"},
      {R"({"dim": 64.5, "n_layers": 2, "n_heads": 4})", "field \"dim\": is 64.5"},
      {R"({"dim": 64, "n_layers": 2, "n_heads": 4, "norm_eps": "small"})", "field \"norm_eps\": is \"small\""},
      {R"({"dim": 64, "n_layers": 2, "n_heads": 5})", "field \"n_heads\": 5 does not divide dim 64"},
      {R"({"dim": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 3})", "field \"n_kv_heads\": 3 does not divide"},
      {R"({"dim": 64, "n_layers": 0, "n_heads": 4})", "field \"n_layers\": is 0"},
      {R"({"dim": 64, "n_layers": 2, "n_heads": 4, "norm_eps": 0})", "field \"norm_eps\": is 0"},
      {R"([1, 2])", "expected a JSON object"},
      {R"({"dim": )", "p.json: invalid JSON"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<ModelConfig> config = ParseParamsJson(c.json, "p.json");
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument) << c.json;
    EXPECT_THAT(config.status().message(), HasSubstr(c.expected)) << c.json;
  }
  EXPECT_EQ(ReadParamsJson("/nonexistent/params.json").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace llama

namespace llama {
namespace {

// Hugging Face's config.json of meta-llama/Llama-2-7b-hf and -70b-hf (the
// fields that matter): the same sizes as Meta's params.json derive.
TEST(HfConfigTest, Llama2HubConfigsGiveMetasSizes) {
  absl::StatusOr<HfModelConfig> b7 = ParseHfConfigJson(
      R"({"architectures": ["LlamaForCausalLM"], "hidden_act": "silu", "hidden_size": 4096,
          "intermediate_size": 11008, "max_position_embeddings": 4096, "model_type": "llama",
          "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
          "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null, "tie_word_embeddings": false,
          "torch_dtype": "float16", "vocab_size": 32000})",
      "config.json");
  ASSERT_TRUE(b7.ok()) << b7.status();
  absl::StatusOr<ModelConfig> meta7 = ParseParamsJson(
      R"({"dim": 4096, "multiple_of": 256, "n_heads": 32, "n_layers": 32, "norm_eps": 1e-05, "vocab_size": -1})", "p");
  ASSERT_TRUE(meta7.ok());
  EXPECT_EQ(b7->model.ffn_hidden_dim(), meta7->ffn_hidden_dim());
  EXPECT_EQ(b7->model.n_kv_heads, 32);
  EXPECT_EQ(b7->model.max_seq_len, 4096);
  EXPECT_FALSE(b7->tie_word_embeddings);

  absl::StatusOr<HfModelConfig> b70 = ParseHfConfigJson(
      R"({"hidden_size": 8192, "intermediate_size": 28672, "num_attention_heads": 64, "num_hidden_layers": 80,
          "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "vocab_size": 32000, "model_type": "llama"})",
      "config.json");
  ASSERT_TRUE(b70.ok()) << b70.status();
  absl::StatusOr<ModelConfig> meta70 = ParseParamsJson(
      R"({"dim": 8192, "multiple_of": 4096, "ffn_dim_multiplier": 1.3, "n_heads": 64, "n_kv_heads": 8,
          "n_layers": 80, "norm_eps": 1e-05, "vocab_size": -1})", "p");
  ASSERT_TRUE(meta70.ok());
  EXPECT_EQ(b70->model.ffn_hidden_dim(), meta70->ffn_hidden_dim());
  EXPECT_EQ(b70->model.n_kv_heads, 8);
  EXPECT_EQ(b70->model.rope_theta, 10000.0);
}

TEST(ModelConfigTest, ScaledRopeFieldsAreChecked) {
  const std::string base = R"("dim": 64, "n_layers": 2, "n_heads": 4, "norm_eps": 1e-05, "vocab_size": 10)";
  absl::StatusOr<ModelConfig> plain = ParseParamsJson("{" + base + R"(, "use_scaled_rope": false})", "p.json");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->rope_scaling.has_value());
  absl::StatusOr<ModelConfig> scaled =
      ParseParamsJson("{" + base + R"(, "use_scaled_rope": true, "rope_scaling_factor": 32})", "p.json");
  ASSERT_TRUE(scaled.ok()) << scaled.status();
  EXPECT_EQ(scaled->rope_scaling->factor, 32);
  EXPECT_EQ(scaled->rope_scaling->high_freq_factor, 4);
  const std::pair<const char*, const char*> cases[] = {
      {R"(, "use_scaled_rope": "yes")", "field \"use_scaled_rope\": is \"yes\"; expected true or false"},
      {R"(, "use_scaled_rope": true, "rope_scaling_factor": 0.5)", "field \"rope_scaling_factor\": is 0.5"},
      {R"(, "use_scaled_rope": true, "rope_high_freq_factor": 1)", "field \"rope_high_freq_factor\": is 1"},
  };
  for (const auto& [extra, message] : cases) {
    absl::StatusOr<ModelConfig> config = ParseParamsJson("{" + base + extra + "}", "p.json");
    ASSERT_FALSE(config.ok()) << extra;
    EXPECT_THAT(config.status().message(), HasSubstr(message)) << extra;
  }
}

TEST(HfConfigTest, ErrorsNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"hidden_size": 64})", "field \"num_hidden_layers\": missing"},
      {R"({"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 1.5,
           "vocab_size": 10})", "field \"intermediate_size\": is 1.5; expected an integer"},
      {R"({"model_type": "gpt2"})", "field \"model_type\": is \"gpt2\""},
      {R"({"hidden_act": "gelu"})", "field \"hidden_act\""},
      {R"({"tie_word_embeddings": "yes", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
           "intermediate_size": 8, "vocab_size": 10})", "field \"tie_word_embeddings\""},
      {R"({"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 8,
           "vocab_size": 10, "head_dim": 8})", "field \"head_dim\": is 8; expected"},
      {"[]", "expected a JSON object"},
  };
  for (const auto& [json, message] : cases) {
    absl::StatusOr<HfModelConfig> config = ParseHfConfigJson(json, "config.json");
    ASSERT_FALSE(config.ok()) << json;
    EXPECT_THAT(config.status().message(), ::testing::HasSubstr(message)) << json;
    EXPECT_THAT(config.status().message(), ::testing::HasSubstr("config.json")) << json;
  }
}

}  // namespace
}  // namespace llama
