#include "checkpoint/converter.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <atomic>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "checkpoint/checkpoint_fixture.h"
#include "checkpoint/llama_layout.h"
#include "checkpoint/pth_reader.h"
#include "checkpoint/shard_digest.h"
#include "checkpoint/shard_format.h"
#include "ops/cast.h"
#include "ops/quantize.h"

namespace llama {
namespace {

namespace fs = std::filesystem;
using ::llama::testing::CheckpointFixturePath;
using ::llama::testing::CheckpointManifest;
using ::llama::testing::Sha256Hex;
using ::llama::testing::ExpectSameShards;
using ::testing::HasSubstr;

std::string OutDir(const std::string& name) { return std::string(getenv("TEST_TMPDIR")) + "/" + name; }

absl::StatusOr<ConvertResult> Convert(const std::string& ckpt_dir, const std::string& out_dir, int world_size,
                                      std::optional<DType> dtype = std::nullopt) {
  ConvertOptions options;
  options.ckpt_dir = ckpt_dir;
  options.out_dir = out_dir;
  options.world_size = world_size;
  options.dtype = dtype;
  return ConvertCheckpoint(options);
}

// The unsplit tensors of a one-rank conversion must equal PyTorch's view of
// the MP=1 checkpoint `reference_model`, bit for bit.
void ExpectEqualsReference(const std::string& dir, const std::string& reference_model) {
  const nlohmann::json& expected = CheckpointManifest()[reference_model + "/consolidated.00.pth"];
  absl::StatusOr<std::unique_ptr<ShardReader>> reader = ShardReader::Open(dir + "/" + ShardFileName(0, 1));
  ASSERT_TRUE(reader.ok()) << reader.status();
  // Llama 2's files also hold rope.freqs, which conversion drops; Llama 3's do not.
  EXPECT_EQ((*reader)->index().tensors_size() + expected.count("rope.freqs"), expected.size());
  for (const shard::TensorEntry& e : (*reader)->index().tensors()) {
    EXPECT_EQ(Sha256Hex((*reader)->Tensor(e.name())->bytes), expected[e.name()]["sha256"].get<std::string>())
        << reference_model << ": " << e.name();
  }
}

// What the launcher checks the tokenizer against before converting: Meta's
// vocab_size -1 resolved from the embedding, for every kind of folder.
TEST(ConverterTest, ReadCheckpointConfigFillsInTheVocabulary) {
  ConvertOptions options;
  options.ckpt_dir = CheckpointFixturePath("tiny_fp32_mp2");
  absl::StatusOr<ModelConfig> config = ReadCheckpointConfig(options);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->vocab_size, 600);
  EXPECT_EQ(config->n_layers, 2);
  ASSERT_TRUE(Convert(options.ckpt_dir, OutDir("config_shards"), 2).ok());
  options.ckpt_dir = OutDir("config_shards");
  config = ReadCheckpointConfig(options);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->vocab_size, 600);
}

TEST(ConverterTest, Mp2MergedEqualsMp1) {
  for (const std::string model : {"tiny_fp32", "gqa_bf16", "llama3_bf16"}) {
    const std::string out = OutDir(model + "_merged");
    absl::StatusOr<ConvertResult> result = Convert(CheckpointFixturePath(model + "_mp2"), out, 1);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->source_shards, 2);
    ExpectEqualsReference(out, model + "_mp1");
  }
}

// PyTorch's .to(torch.float16) of the fp32 weights is the fp16 fixture.
TEST(ConverterTest, DtypeConversionMatchesPyTorch) {
  const std::string out = OutDir("fp32_to_fp16");
  ASSERT_TRUE(Convert(CheckpointFixturePath("tiny_fp32_mp1"), out, 1, DType::kF16).ok());
  ExpectEqualsReference(out, "tiny_fp16_mp1");
}

// int8: the linear layers' weights are llama.cpp's Q8_0 of PyTorch's values
// (split across ranks on whole blocks), the embedding and norms as stored;
// converting again is up to date; int8 shards are not resharded.
TEST(ConverterTest, Int8QuantizesTheLinearLayers) {
  const std::string out = OutDir("llama3_int8");
  ASSERT_TRUE(Convert(CheckpointFixturePath("llama3_bf16_mp2"), out, 2, DType::kQ8_0).ok());
  absl::StatusOr<std::unique_ptr<PthFile>> source = PthFile::Open(CheckpointFixturePath("llama3_bf16_mp1/consolidated.00.pth"));
  ASSERT_TRUE(source.ok()) << source.status();
  int quantized = 0;
  for (int rank = 0; rank < 2; ++rank) {
    absl::StatusOr<std::unique_ptr<ShardReader>> reader = ShardReader::Open(out + "/" + ShardFileName(rank, 2));
    ASSERT_TRUE(reader.ok()) << reader.status();
    for (const shard::TensorEntry& e : (*reader)->index().tensors()) {
      const bool linear = e.shape_size() == 2 && e.name() != "tok_embeddings.weight";
      EXPECT_EQ(e.dtype(), static_cast<int>(linear ? DType::kQ8_0 : DType::kBF16)) << e.name();
      if (!linear || e.split().dim() != 0) continue;
      // Rows [begin, end) of the full tensor, quantized here from PyTorch's bf16.
      const FileTensor* full = (*source)->Find(e.name());
      ASSERT_NE(full, nullptr);
      const int64_t in = full->shape[1], rows = e.split().end() - e.split().begin();
      std::vector<float> values(rows * in);
      ASSERT_TRUE(CastElements(full->bytes.data() + e.split().begin() * in * 2, DType::kBF16, values.data(),
                               DType::kF32, values.size()).ok());
      std::vector<uint8_t> expected(values.size() / 32 * 34);
      ASSERT_TRUE(QuantizeQ8_0(values.data(), values.size(), expected.data()).ok());
      absl::Span<const uint8_t> ours = (*reader)->Tensor(e.name())->bytes;
      EXPECT_TRUE(std::equal(ours.begin(), ours.end(), expected.begin(), expected.end())) << e.name();
      ++quantized;
    }
  }
  EXPECT_GE(quantized, 10);
  absl::StatusOr<ConvertResult> again = Convert(CheckpointFixturePath("llama3_bf16_mp2"), out, 2, DType::kQ8_0);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->up_to_date);
  absl::StatusOr<ConvertResult> reshard = Convert(out, OutDir("llama3_int8_tp1"), 1);
  EXPECT_EQ(reshard.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(reshard.status().message(), HasSubstr("convert the original checkpoint with --dtype=int8"));
  // Rows must be whole blocks on every rank.
  absl::StatusOr<ConvertResult> uneven = Convert(CheckpointFixturePath("gqa_bf16_mp2"), OutDir("gqa_int8"), 2, DType::kQ8_0);
  EXPECT_THAT(uneven.status().message(), HasSubstr("int8 blocks need a multiple of 32"));
}

TEST(ConverterTest, ReshardingIsTheSameAsDirectConversion) {
  // 1 -> 2 -> 1 equals 1 -> 1.
  const std::string fp32 = CheckpointFixturePath("tiny_fp32_mp1");
  ASSERT_TRUE(Convert(fp32, OutDir("a1"), 1).ok());
  ASSERT_TRUE(Convert(fp32, OutDir("a2"), 2).ok());
  ASSERT_TRUE(Convert(OutDir("a2"), OutDir("a21"), 1).ok());
  ExpectSameShards(OutDir("a21"), OutDir("a1"), 1);
  // 2 -> 4 (ours) equals Meta's MP=2 -> 4, and MP=1 -> 4.
  const std::string gqa2 = CheckpointFixturePath("gqa_bf16_mp2");
  ASSERT_TRUE(Convert(gqa2, OutDir("b2"), 2).ok());
  ASSERT_TRUE(Convert(OutDir("b2"), OutDir("b24"), 4).ok());
  ASSERT_TRUE(Convert(gqa2, OutDir("b4"), 4).ok());
  ASSERT_TRUE(Convert(CheckpointFixturePath("gqa_bf16_mp1"), OutDir("b14"), 4).ok());
  ExpectSameShards(OutDir("b24"), OutDir("b4"), 4);
  ExpectSameShards(OutDir("b14"), OutDir("b4"), 4);
  // 8 ranks replicate the 2 KV heads; going back to 1 undoes it.
  ASSERT_TRUE(Convert(OutDir("b4"), OutDir("b8"), 8).ok());
  ASSERT_TRUE(Convert(OutDir("b8"), OutDir("b81"), 1).ok());
  ExpectEqualsReference(OutDir("b81"), "gqa_bf16_mp1");
}

// With more ranks than KV heads, each rank holds the KV head its query heads use.
TEST(ConverterTest, KvHeadsAreReplicated) {
  const std::string out = OutDir("gqa8");
  ASSERT_TRUE(Convert(CheckpointFixturePath("gqa_bf16_mp1"), out, 8).ok());
  absl::StatusOr<std::unique_ptr<PthFile>> pth =
      PthFile::Open(CheckpointFixturePath("gqa_bf16_mp1/consolidated.00.pth"));
  ASSERT_TRUE(pth.ok());
  const FileTensor* wk = (*pth)->Find("layers.1.attention.wk.weight");
  const size_t head_bytes = 8 * 64 * 2;  // head_dim 8 rows of dim 64, bf16.
  for (int rank = 0; rank < 8; ++rank) {
    absl::StatusOr<std::unique_ptr<ShardReader>> reader = ShardReader::Open(out + "/" + ShardFileName(rank, 8));
    ASSERT_TRUE(reader.ok());
    absl::StatusOr<ShardTensor> t = (*reader)->Tensor("layers.1.attention.wk.weight");
    ASSERT_TRUE(t.ok());
    const int head = rank * 2 / 8;
    absl::Span<const uint8_t> expected = wk->bytes.subspan(head * head_bytes, head_bytes);
    EXPECT_TRUE(std::equal(t->bytes.begin(), t->bytes.end(), expected.begin(), expected.end())) << rank;
  }
}

TEST(ConverterTest, RerunIsANoOpUntilASourceChanges) {
  const std::string src = OutDir("rerun_src");
  fs::create_directories(src);
  for (const char* f : {"consolidated.00.pth", "params.json"}) {
    fs::copy_file(CheckpointFixturePath(std::string("tiny_fp32_mp1/") + f), src + "/" + f);
  }
  const std::string out = OutDir("rerun_out");
  absl::StatusOr<ConvertResult> first = Convert(src, out, 2);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->up_to_date);
  absl::StatusOr<ConvertResult> second = Convert(src, out, 2);
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->up_to_date);
  EXPECT_FALSE(Convert(src, out, 2, DType::kBF16)->up_to_date);  // Another dtype.
  EXPECT_TRUE(Convert(src, out, 2, DType::kBF16)->up_to_date);
  fs::last_write_time(src + "/params.json", fs::file_time_type::clock::now() + std::chrono::hours(1));
  EXPECT_FALSE(Convert(src, out, 2, DType::kBF16)->up_to_date);
  EXPECT_FALSE(fs::exists(out + ".partial"));
}

// An --out_dir that is a file is the user's: refused before any work, and
// left as it was (it used to be deleted and replaced by the shards).
// Two conversions into one folder at once (two launchers on shared
// storage): both succeed, one converts and the other finds its result.
TEST(ConverterTest, ConversionsStartedTogetherTakeTurns) {
  const std::string out = OutDir("together_out");
  std::vector<absl::StatusOr<ConvertResult>> results(4, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  std::atomic<int> ready{0};
  for (auto& result : results) {
    threads.emplace_back([&, out] {
      // All start at once: a conversion of the fixture takes milliseconds.
      ++ready;
      while (ready < static_cast<int>(results.size())) std::this_thread::yield();
      result = Convert(CheckpointFixturePath("tiny_fp32_mp1"), out, 2);
    });
  }
  for (std::thread& t : threads) t.join();
  int converted = 0;
  for (const auto& result : results) {
    ASSERT_TRUE(result.ok()) << result.status();
    converted += !result->up_to_date;
  }
  EXPECT_EQ(converted, 1);
  EXPECT_FALSE(fs::exists(out + ".partial"));
}

TEST(ConverterTest, AFileAtOutDirIsRefusedAndKept) {
  const std::string out = OutDir("out_dir_is_a_file");
  { std::ofstream(out) << "precious"; }
  absl::StatusOr<ConvertResult> result = Convert(CheckpointFixturePath("tiny_fp32_mp1"), out, 1);
  EXPECT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), HasSubstr("a file is there; expected a folder for the shards"));
  std::ifstream kept(out);
  std::string text;
  kept >> text;
  EXPECT_EQ(text, "precious");
  EXPECT_FALSE(fs::exists(out + ".partial"));
}

struct BadCase {
  std::string ckpt;
  int world_size;
  bool verify_checklist;
  const char* expected;
};

class ConverterBadInputTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(ConverterBadInputTest, ClearErrorAndNothingLeftBehind) {
  const BadCase& bad = GetParam();
  const std::string out = OutDir("bad_" + std::to_string(std::hash<std::string>()(bad.ckpt)));
  ConvertOptions options;
  options.ckpt_dir = CheckpointFixturePath(bad.ckpt);
  options.out_dir = out;
  options.world_size = bad.world_size;
  options.verify_checklist = bad.verify_checklist;
  absl::StatusOr<ConvertResult> result = ConvertCheckpoint(options);
  EXPECT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), HasSubstr(bad.expected));
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out + ".partial"));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ConverterBadInputTest,
    ::testing::Values(
        BadCase{"broken/missing_tensor", 1, false, "consolidated.00.pth: missing tensor \"output.weight\""},
        BadCase{"broken/extra_tensor", 1, false, "unexpected tensor \"layers.9.attention.wq.weight\""},
        BadCase{"broken/shape_disagree", 1, false,
                "consolidated.01.pth: tensor \"layers.1.attention.wq.weight\" has shape [31, 64]; expected [32, 64]"},
        BadCase{"broken/dtype_disagree", 1, false, "shards disagree on tensor \"tok_embeddings.weight\": f32"},
        BadCase{"broken/missing_shard", 1, false, "consolidated.01.pth is missing"},
        BadCase{"broken/missing_shard", 1, true, "consolidated.01.pth is missing"},
        BadCase{"broken/bad_params", 1, false, "params.json: field \"n_heads\": is \"four\""},
        BadCase{"broken/bad_checksum", 1, true, "consolidated.00.pth is corrupt or truncated (MD5 differs)"},
        // w2 [dim, hidden 192]: [3, 5] is element 3 * 192 + 5 of the whole
        // tensor, and 3 * 96 + 5 of rank 0's half of its columns.
        BadCase{"broken/nan_weight", 1, false,
                "rank-0-of-1.shard, tensor \"layers.1.feed_forward.w2.weight\": element 581 of the shard's part is "
                "NaN or infinite as f32; the checkpoint is damaged"},
        BadCase{"broken/nan_weight", 2, false, "rank-0-of-2.shard, tensor \"layers.1.feed_forward.w2.weight\": "
                                               "element 293 of the shard's part"},
        BadCase{"tiny_fp32_mp1", 3, false, "--world_size: world size 3 does not divide n_heads (4)"},
        BadCase{"gqa_bf16_mp1", 16, false, "world size 16 does not divide n_heads (8)"},
        BadCase{"does_not_exist", 1, false, "not a directory"},
        BadCase{"odd", 1, false, "no consolidated.NN.pth"}));

}  // namespace
}  // namespace llama
