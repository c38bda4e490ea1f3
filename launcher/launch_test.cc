#include "launcher/launch.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint_fixture.h"
#include "tokenizer/tokenizer_fixture.h"

namespace llama {
namespace {

using ::testing::HasSubstr;

std::string TempDir() { return std::getenv("TEST_TMPDIR"); }

// A batch job on the fixture checkpoint (copied: its shards are written
// beside it), one rank of the real //worker, the answers to `name`.jsonl.
LaunchPlan Plan(const std::string& name, const std::string& worker) {
  const std::string ckpt = absl::StrCat(TempDir(), "/", name, "_ckpt");
  std::filesystem::copy(testing::CheckpointFixturePath("tiny_fp32_mp1"), ckpt,
                        std::filesystem::copy_options::recursive | std::filesystem::copy_options::skip_existing);
  LauncherFlags flags;
  flags.ckpt_dir = ckpt;
  flags.worker = worker;
  flags.log_dir = absl::StrCat(TempDir(), "/", name, "_logs");
  flags.job.tokenizer_path = testing::TokenizerFixturePath("tokenizer.model");
  flags.job.prompt = "I believe the meaning of life is";
  flags.job.max_gen_len = 4;
  flags.job.threads = 1;
  flags.job.output = absl::StrCat(TempDir(), "/", name, ".jsonl");
  LaunchContext context = CurrentContext();
  context.cache_dir = TempDir() + "/cache";
  absl::StatusOr<LaunchPlan> plan = PlanLaunch({}, flags, context);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *std::move(plan);
}

// Shards prepared, the worker started and supervised, its answer written.
TEST(LaunchTest, ExecutesABatchJob) {
  const LaunchPlan plan = Plan("job", "worker/worker");
  const absl::Status status = Execute(plan);
  ASSERT_TRUE(status.ok()) << status;
  std::ifstream output(plan.job.output);
  std::string line;
  ASSERT_TRUE(std::getline(output, line)) << plan.job.output;
  EXPECT_THAT(line, HasSubstr("\"index\":0"));
  EXPECT_FALSE(std::getline(output, line)) << "one prompt, one line";
  EXPECT_TRUE(std::filesystem::exists(plan.ckpt_dir + "/shards/tp1/rank-0-of-1.shard"));
}

// A worker that fails is the job's failure, naming the rank, its exit
// status and its log.
TEST(LaunchTest, AFailedRankIsReported) {
  const LaunchPlan plan = Plan("failing", "/bin/false");
  const absl::Status status = Execute(plan);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("rank 0 failed (exit code 1)"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("its log: " + plan.supervise.log_dir));
}

}  // namespace
}  // namespace llama
