#include "worker/batch_job.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer_fixture.h"
#include "worker/model/synthetic_weights.h"
#include "worker/rank_model.h"

namespace llama {
namespace {

using ::testing::HasSubstr;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A batch job on a one-rank model of random weights with the fixture
// tokenizer's vocabulary, its --output in the test's folder.
class BatchJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(tokenizer_.ok()) << tokenizer_.status();
    config_.dim = 64;
    config_.n_layers = 2;
    config_.n_heads = 4;
    config_.n_kv_heads = 4;
    config_.vocab_size = (*tokenizer_)->vocab_size();
    config_.multiple_of = 32;
    absl::StatusOr<ModelWeights> weights = SyntheticWeights(config_, DType::kF32);
    ASSERT_TRUE(weights.ok()) << weights.status();
    RendezvousOptions alone;
    alone.world_size = 1;
    absl::StatusOr<RankPeers> peers = JoinPeers(alone, 0);
    ASSERT_TRUE(peers.ok()) << peers.status();
    peers_ = *std::move(peers);
    flags_.tokenizer_path = testing::TokenizerFixturePath("tokenizer.model");
    flags_.max_seq_len = 64;
    flags_.max_gen_len = 6;
    flags_.temperature = 0;
    flags_.threads = 1;
    flags_.output = std::string(std::getenv("TEST_TMPDIR")) + "/" +
                    ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".jsonl";
    absl::StatusOr<RankPlan> plan = PlanRankModel(flags_, *weights, Device::kCpu, peers_, 1);
    ASSERT_TRUE(plan.ok()) << plan.status();
    absl::StatusOr<RankModel> model =
        CreateRankModel(Device::kCpu, peers_, *std::move(weights), *plan, std::chrono::seconds(10));
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
    index_.mutable_config()->set_dim(config_.dim);
    job_.prompts = {"I believe the meaning of life is", "Hello", "The capital of France is"};
  }

  JobIdentity Identity() {
    absl::StatusOr<JobIdentity> identity = BatchJobIdentity(flags_, job_, "", index_, **tokenizer_, Device::kCpu);
    EXPECT_TRUE(identity.ok()) << identity.status();
    return identity->WithContext(model_.model->limits().max_seq_len);
  }

  // Opens --output and runs what it lacks; the number of prompts run.
  size_t Run() {
    absl::StatusOr<BatchOutput> output = OpenBatchOutput(flags_, Identity(), job_);
    EXPECT_TRUE(output.ok()) << output.status();
    if (!output.ok()) return 0;
    const size_t todo = output->todo.size();
    absl::StatusOr<BatchJobRun> run = RunBatchJob(flags_, job_, "", *std::move(output), *model_.model, **tokenizer_);
    EXPECT_TRUE(run.ok()) << run.status();
    EXPECT_TRUE(run.ok() && run->failed_prompts.ok());
    return todo;
  }

  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer_ =
      Tokenizer::Load(testing::TokenizerFixturePath("tokenizer.model"));
  ModelConfig config_;
  RankPeers peers_;
  RankModel model_;
  shard::ShardIndex index_;
  JobFlags flags_;
  Job job_;
};

// Every prompt answered once, in order, each line naming its job; a rerun
// of the same job runs nothing and leaves the file as it was.
TEST_F(BatchJobTest, ARerunOfTheSameJobResumes) {
  EXPECT_EQ(Run(), 3u);
  const std::string first = ReadAll(flags_.output);
  std::istringstream lines(first);
  size_t index = 0;
  for (std::string line; std::getline(lines, line); ++index) {
    const nlohmann::ordered_json j = nlohmann::ordered_json::parse(line);
    EXPECT_EQ(j["index"], index);
    EXPECT_EQ(j["job"].dump(), Identity().fields().dump());
    EXPECT_FALSE(j["token_ids"].empty());
  }
  EXPECT_EQ(index, 3u);
  EXPECT_EQ(Run(), 0u);
  EXPECT_EQ(ReadAll(flags_.output), first);
}

// Another job's file is refused before anything runs and stays whole;
// --overwrite_output writes exactly what a run into a fresh file writes.
TEST_F(BatchJobTest, AnotherJobIsRefusedUnlessOverwritten) {
  EXPECT_EQ(Run(), 3u);
  const std::string first = ReadAll(flags_.output);
  flags_.max_gen_len = 3;
  EXPECT_EQ(CheckBatchOutput(flags_, Identity(), job_).code(), absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<BatchOutput> refused = OpenBatchOutput(flags_, Identity(), job_);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("holds answers of another job: --max_gen_len values differ (this job: 3; the file's: 6)"));
  EXPECT_EQ(ReadAll(flags_.output), first);

  const std::string overwritten = flags_.output;
  flags_.output = overwritten + ".fresh";
  EXPECT_EQ(Run(), 3u);
  flags_.output = overwritten;
  flags_.overwrite_output = true;
  EXPECT_EQ(Run(), 3u);
  EXPECT_EQ(ReadAll(flags_.output), ReadAll(overwritten + ".fresh"));
  EXPECT_NE(ReadAll(flags_.output), first);
  EXPECT_FALSE(std::filesystem::exists(flags_.output + ".partial"));
}

// A context the KV cache shortened (--max_seq_len=0) decides where long
// answers end: the check before loading leaves it, the one after planning
// refuses a file written at another context.
TEST_F(BatchJobTest, AnotherContextIsAnotherJob) {
  EXPECT_EQ(Run(), 3u);
  absl::StatusOr<JobIdentity> unplanned = BatchJobIdentity(flags_, job_, "", index_, **tokenizer_, Device::kCpu);
  ASSERT_TRUE(unplanned.ok()) << unplanned.status();
  EXPECT_TRUE(CheckBatchOutput(flags_, *unplanned, job_).ok());
  absl::StatusOr<BatchOutput> refused = OpenBatchOutput(flags_, unplanned->WithContext(32), job_);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("contexts (--max_seq_len, or the model's own"));
}

// Where --output cannot be a file, or cannot be read, the job is refused
// before it runs, and the file is never taken for absent and overwritten.
TEST_F(BatchJobTest, AnOutputThatIsNoReadableFileIsRefused) {
  std::filesystem::create_directories(flags_.output);
  EXPECT_THAT(std::string(CheckBatchOutput(flags_, Identity(), job_).message()), HasSubstr("is not a file"));
  flags_.overwrite_output = true;
  EXPECT_THAT(std::string(OpenBatchOutput(flags_, Identity(), job_).status().message()), HasSubstr("is not a file"));
}

}  // namespace
}  // namespace llama
