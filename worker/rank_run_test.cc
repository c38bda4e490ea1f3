#include "worker/rank_run.h"

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_fixture.h"
#include "checkpoint/converter.h"
#include "tokenizer/tokenizer_fixture.h"

namespace llama {
namespace {

using ::testing::HasSubstr;

std::string TempDir() { return std::getenv("TEST_TMPDIR"); }

// A single rank (no RANK in the environment) on the fixture's shards.
JobFlags OneRank() {
  ConvertOptions convert;
  convert.ckpt_dir = testing::CheckpointFixturePath("tiny_fp32_mp1");
  convert.out_dir = TempDir() + "/shards";
  const absl::StatusOr<ConvertResult> converted = ConvertCheckpoint(convert);
  EXPECT_TRUE(converted.ok()) << converted.status();
  JobFlags flags;
  flags.shard_dir = convert.out_dir;
  flags.tokenizer_path = testing::TokenizerFixturePath("tokenizer.model");
  flags.max_seq_len = 64;
  flags.max_gen_len = 5;
  flags.temperature = 0;
  flags.threads = 1;
  return flags;
}

// A batch job's answer in --output and its numbers in the summary file.
TEST(RankRunTest, RunsABatchJob) {
  JobFlags flags = OneRank();
  flags.prompt = "I believe the meaning of life is";
  flags.output = TempDir() + "/out.jsonl";
  const std::string summary = TempDir() + "/summary.json";
  const absl::Status status = RunRank(flags, summary);
  ASSERT_TRUE(status.ok()) << status;
  std::ifstream output(flags.output);
  std::string line;
  ASSERT_TRUE(std::getline(output, line));
  EXPECT_EQ(nlohmann::json::parse(line)["token_ids"].size(), 5u) << line;
  std::ifstream numbers(summary);
  const nlohmann::json j = nlohmann::json::parse(numbers, nullptr, false);
  EXPECT_EQ(j.value("tokens", 0), 5) << summary;
  EXPECT_EQ(j.value("ranks", 0), 1) << summary;
}

// What a rank needs and lacks is refused naming it, before any loading.
TEST(RankRunTest, RefusesWhatItLacks) {
  JobFlags flags = OneRank();
  flags.prompt = "hi";
  JobFlags no_tokenizer = flags;
  no_tokenizer.tokenizer_path.clear();
  EXPECT_THAT(std::string(RunRank(no_tokenizer, "").message()), HasSubstr("--tokenizer_path are required"));
  JobFlags no_shards = flags;
  no_shards.shard_dir = TempDir() + "/absent";
  const absl::Status missing = RunRank(no_shards, "");
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound) << missing;
  EXPECT_THAT(std::string(missing.message()), HasSubstr("no shard for rank 0 of 1"));
  JobFlags bad = flags;
  bad.top_p = 2;
  EXPECT_THAT(std::string(RunRank(bad, "").message()), HasSubstr("--top_p=2"));
}

}  // namespace
}  // namespace llama
