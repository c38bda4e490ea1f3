// Converting Hugging Face folders: the same shards as Meta's originals of
// the same weights, whatever the file layout, and clear refusals.
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint_fixture.h"
#include "checkpoint/converter.h"
#include "checkpoint/shard_digest.h"
#include "checkpoint/shard_format.h"

namespace llama {
namespace {

namespace fs = std::filesystem;
using ::llama::testing::CheckpointFixturePath;
using ::llama::testing::CheckpointManifest;
using ::llama::testing::ExpectSameShards;
using ::llama::testing::Sha256Hex;
using ::testing::HasSubstr;

std::string HfFixturePath(const std::string& model) { return "tests/fixtures/hf_fixture/" + model; }
std::string OutDir(const std::string& name) { return std::string(getenv("TEST_TMPDIR")) + "/" + name; }

absl::StatusOr<ConvertResult> Convert(const std::string& ckpt_dir, const std::string& out_dir, int world_size) {
  ConvertOptions options;
  options.ckpt_dir = ckpt_dir;
  options.out_dir = out_dir;
  options.world_size = world_size;
  return ConvertCheckpoint(options);
}

// What the kernels use from the config, and the RoPE layout.
std::string Geometry(const std::string& dir, int world_size) {
  absl::StatusOr<std::unique_ptr<ShardReader>> reader = ShardReader::Open(dir + "/" + ShardFileName(0, world_size));
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return "";
  const shard::ShardIndex& index = (*reader)->index();
  EXPECT_EQ(index.rope_layout(), shard::ROPE_LAYOUT_INTERLEAVED);
  const ModelConfig m = ModelConfigFromProto(index.config());
  std::string geometry = absl::StrCat(m.dim, " ", m.n_layers, " ", m.n_heads, " ", m.n_kv_heads, " ", m.vocab_size,
                                      " ", m.ffn_hidden_dim(), " ", m.norm_eps, " ", m.rope_theta);
  if (m.rope_scaling.has_value()) {
    absl::StrAppend(&geometry, " scaled RoPE ", m.rope_scaling->factor, " ", m.rope_scaling->low_freq_factor, " ",
                    m.rope_scaling->high_freq_factor, " ", m.rope_scaling->original_context);
  }
  return geometry;
}

TEST(HfImportTest, SameShardsAsMetasOriginalAtEveryWorldSize) {
  const std::pair<const char*, const char*> pairs[] = {
      {"tiny_fp32_hf", "tiny_fp32_mp1"},   // One model.safetensors.
      {"gqa_bf16_hf", "gqa_bf16_mp2"},     // Sharded safetensors; Meta's side split in two.
      {"tiny_fp16_bin", "tiny_fp16_mp1"},  // pytorch_model.bin.
      {"llama3_bf16_hf", "llama3_bf16_mp1"},  // Llama 3.1: rope_scaling "llama3".
  };
  for (const auto& [hf, meta] : pairs) {
    // World size 4 replicates the GQA model's 2 KV heads: reordered key rows
    // must land in each replica.
    for (int world_size : {1, 2, 4}) {
      const std::string label = absl::StrCat(hf, "_tp", world_size);
      absl::StatusOr<ConvertResult> from_hf = Convert(HfFixturePath(hf), OutDir(label + "_hf"), world_size);
      ASSERT_TRUE(from_hf.ok()) << label << ": " << from_hf.status();
      absl::StatusOr<ConvertResult> from_meta =
          Convert(CheckpointFixturePath(meta), OutDir(label + "_meta"), world_size);
      ASSERT_TRUE(from_meta.ok()) << label << ": " << from_meta.status();
      EXPECT_EQ(Geometry(OutDir(label + "_hf"), world_size), Geometry(OutDir(label + "_meta"), world_size)) << label;
      ExpectSameShards(OutDir(label + "_hf"), OutDir(label + "_meta"), world_size);
    }
  }
}

TEST(HfImportTest, ConvertingAgainIsUpToDate) {
  const std::string out = OutDir("again");
  ASSERT_TRUE(Convert(HfFixturePath("gqa_bf16_hf"), out, 1).ok());
  absl::StatusOr<ConvertResult> again = Convert(HfFixturePath("gqa_bf16_hf"), out, 1);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->up_to_date);
  EXPECT_EQ(again->source_shards, 2);
}

TEST(HfImportTest, TiedEmbeddingsBecomeTheOutputProjection) {
  const std::string out = OutDir("tied");
  ASSERT_TRUE(Convert(HfFixturePath("tied_fp32_hf"), out, 2).ok());
  const std::string embedding =
      CheckpointManifest()["tiny_fp32_mp1/consolidated.00.pth"]["tok_embeddings.weight"]["sha256"];
  // The output is split by rows: rank 0's then rank 1's rows are the matrix.
  std::vector<uint8_t> output;
  for (int rank = 0; rank < 2; ++rank) {
    absl::StatusOr<std::unique_ptr<ShardReader>> reader = ShardReader::Open(out + "/" + ShardFileName(rank, 2));
    ASSERT_TRUE(reader.ok()) << reader.status();
    absl::Span<const uint8_t> part = (*reader)->Tensor("output.weight")->bytes;
    output.insert(output.end(), part.begin(), part.end());
  }
  EXPECT_EQ(Sha256Hex(output), embedding);
}

// A copy of a fixture folder whose config.json is edited by `edit`.
std::string EditedCopy(const std::string& model, const std::string& name,
                       const std::function<void(nlohmann::json&)>& edit) {
  const std::string dir = OutDir(name);
  fs::remove_all(dir);
  fs::copy(HfFixturePath(model), dir);
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
  }
  std::ifstream in(dir + "/config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  edit(config);
  std::ofstream(dir + "/config.json") << config.dump();
  return dir;
}

TEST(HfImportTest, RefusesWhatTheModelCannotRun) {
  struct Case {
    const char* name;
    std::function<void(nlohmann::json&)> edit;
    const char* message;
  };
  const Case cases[] = {
      {"untied_without_lm_head", [](nlohmann::json& c) { c["tie_word_embeddings"] = false; },
       "lm_head.weight; config.json says tie_word_embeddings is false"},
      {"rope_scaling", [](nlohmann::json& c) { c["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}}; },
       "only Llama 3's scaling"},
      {"mistral", [](nlohmann::json& c) { c["model_type"] = "mistral"; }, "field \"model_type\": is \"mistral\""},
      {"bias", [](nlohmann::json& c) { c["attention_bias"] = true; }, "field \"attention_bias\""},
      {"heads", [](nlohmann::json& c) { c["num_attention_heads"] = 3; }, "\"n_heads\": 3 does not divide dim 64"},
      {"no_size", [](nlohmann::json& c) { c.erase("intermediate_size"); }, "field \"intermediate_size\": missing"},
      {"wrong_ffn", [](nlohmann::json& c) { c["intermediate_size"] = 200; }, "expected [200, 64]"},
  };
  for (const Case& c : cases) {
    const std::string dir = EditedCopy("tied_fp32_hf", c.name, c.edit);
    absl::StatusOr<ConvertResult> result = Convert(dir, OutDir(std::string(c.name) + "_out"), 1);
    ASSERT_FALSE(result.ok()) << c.name;
    EXPECT_THAT(result.status().message(), HasSubstr(c.message)) << c.name;
    EXPECT_FALSE(fs::exists(OutDir(std::string(c.name) + "_out"))) << c.name;
  }
}

TEST(HfImportTest, RefusesAnIndexPointingOutsideTheFolder) {
  const std::string dir = EditedCopy("gqa_bf16_hf", "escape", [](nlohmann::json&) {});
  nlohmann::json index = nlohmann::json::parse(std::ifstream(dir + "/model.safetensors.index.json"));
  index["weight_map"]["model.norm.weight"] = "../../etc/passwd";
  std::ofstream(dir + "/model.safetensors.index.json") << index.dump();
  absl::StatusOr<ConvertResult> result = Convert(dir, OutDir("escape_out"), 1);
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), HasSubstr("weight_map[\"model.norm.weight\"] is \"../../etc/passwd\""));

  fs::remove(dir + "/model-00002-of-00002.safetensors");
  index["weight_map"]["model.norm.weight"] = "model-00002-of-00002.safetensors";
  std::ofstream(dir + "/model.safetensors.index.json") << index.dump();
  result = Convert(dir, OutDir("escape_out"), 1);
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), HasSubstr("model-00002-of-00002.safetensors"));
}

// Folders whose files do not make a Llama model: each refused naming the
// file or tensor, with nothing written.
TEST(HfImportTest, RefusesFoldersThatAreNotALlamaModel) {
  const auto refused = [](const std::string& dir, const std::string& message) {
    absl::StatusOr<ConvertResult> result = Convert(dir, dir + "_out", 1);
    ASSERT_FALSE(result.ok()) << message;
    EXPECT_THAT(result.status().message(), HasSubstr(message));
    EXPECT_FALSE(fs::exists(dir + "_out"));
  };
  const auto unchanged = [](nlohmann::json&) {};

  std::string dir = EditedCopy("tiny_fp32_hf", "no_weights", unchanged);
  fs::remove(dir + "/model.safetensors");
  std::ofstream(dir + "/pytorch_model.bin.index.json") << "[]";  // The only weights left: a broken index.
  refused(dir, "pytorch_model.bin.index.json: expected a JSON object with a \"weight_map\" object");
  std::ofstream(dir + "/pytorch_model.bin.index.json") << R"({"weight_map": {}})";
  refused(dir, "pytorch_model.bin.index.json: weight_map is empty");
  fs::remove(dir + "/pytorch_model.bin.index.json");
  refused(dir, "no consolidated.NN.pth (Meta's checkpoint), config.json with model.safetensors");

  // A tensor no Llama has, in a well-formed safetensors file.
  dir = EditedCopy("tiny_fp32_hf", "foreign_tensor", unchanged);
  const std::string header = R"({"model.vision_tower.weight":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(header.size() >> (8 * i));
  std::ofstream(dir + "/model.safetensors", std::ios::binary) << bytes << header << std::string(4, '\0');
  refused(dir, "model.safetensors: unexpected tensor \"model.vision_tower.weight\" (not part of a Llama model)");

  // Layers beyond config.json's count.
  dir = EditedCopy("tiny_fp32_hf", "extra_layers", [](nlohmann::json& c) { c["num_hidden_layers"] = 1; });
  refused(dir, "(config.json describes 1 layers)");

  // The same tensor in two files of a sharded checkpoint.
  dir = EditedCopy("gqa_bf16_hf", "twice", unchanged);
  fs::copy_file(dir + "/model-00001-of-00002.safetensors", dir + "/copy.safetensors");
  nlohmann::json index = nlohmann::json::parse(std::ifstream(dir + "/model.safetensors.index.json"));
  index["weight_map"]["model.norm.weight"] = "copy.safetensors";
  std::ofstream(dir + "/model.safetensors.index.json") << index.dump();
  refused(dir, "\" is in both ");
}

}  // namespace
}  // namespace llama
