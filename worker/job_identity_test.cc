#include "worker/job_identity.h"

#include <cstdlib>
#include <functional>
#include <limits>
#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint_fixture.h"
#include "checkpoint/converter.h"
#include "checkpoint/shard_format.h"
#include "tokenizer/tokenizer_fixture.h"

namespace llama {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Rank `rank`'s shard index of fixture `model` converted for `world_size`
// ranks (to `dtype` when given).
shard::ShardIndex ConvertedIndex(const std::string& model, int world_size, int rank,
                                 std::optional<DType> dtype = std::nullopt) {
  ConvertOptions options;
  options.ckpt_dir = testing::CheckpointFixturePath(model);
  options.out_dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", model, "_tp", world_size,
                                 dtype.has_value() ? absl::StrCat("_", DTypeName(*dtype)) : "");
  options.world_size = world_size;
  options.dtype = dtype;
  const absl::StatusOr<ConvertResult> converted = ConvertCheckpoint(options);
  EXPECT_TRUE(converted.ok()) << converted.status();
  absl::StatusOr<std::unique_ptr<ShardReader>> shard =
      ShardReader::Open(absl::StrCat(options.out_dir, "/", ShardFileName(rank, world_size)));
  EXPECT_TRUE(shard.ok()) << shard.status();
  return shard.ok() ? (*shard)->index() : shard::ShardIndex();
}

class JobIdentityTest : public ::testing::Test {
 protected:
  JobIdentityTest() {
    job_.prompts = {"I believe the meaning of life is", "Simply put, the theory of relativity states that"};
    inputs_.shard_index = &tiny_tp1_;
    inputs_.tokenizer_path = testing::TokenizerFixturePath("tokenizer.model");
    inputs_.job = &job_;
    inputs_.device = "cpu";
    inputs_.kv_cache_dtype = "f32";
    inputs_.temperature = 0.6;
    inputs_.top_p = 0.9;
    inputs_.max_gen_len = -1;
    inputs_.seed = std::numeric_limits<uint64_t>::max();
  }

  JobIdentity Of(const JobInputs& inputs) {
    absl::StatusOr<JobIdentity> identity = JobIdentity::Of(inputs);
    EXPECT_TRUE(identity.ok()) << identity.status();
    return *identity;
  }

  // The identity as the next run reads it back from --output.
  static JobIdentity ReadBack(const JobIdentity& identity) {
    absl::StatusOr<JobIdentity> back = JobIdentity::FromJson(nlohmann::json::parse(identity.fields().dump()));
    EXPECT_TRUE(back.ok()) << back.status();
    return *back;
  }

  static inline const shard::ShardIndex tiny_tp1_ = ConvertedIndex("tiny_fp32_mp1", 1, 0);
  Job job_;
  JobInputs inputs_;
};

// Answers are identical at every tensor-parallel degree, so the identity is
// too: from either rank of a 2-rank conversion it is the 1-rank one's.
TEST_F(JobIdentityTest, TheSameAtEveryDegreeAndRank) {
  const JobIdentity one = Of(inputs_);
  for (int rank : {0, 1}) {
    const shard::ShardIndex two = ConvertedIndex("tiny_fp32_mp1", 2, rank);
    JobInputs inputs = inputs_;
    inputs.shard_index = &two;
    EXPECT_EQ(Of(inputs).FirstDifference(one), "") << "rank " << rank;
  }
}

// What is written into --output reads back as the same job: doubles, the
// largest seed and a negative length survive JSON.
TEST_F(JobIdentityTest, ReadsBackAsTheSameJob) {
  const JobIdentity identity = Of(inputs_);
  EXPECT_EQ(identity.FirstDifference(ReadBack(identity)), "");
  EXPECT_EQ(ReadBack(identity).FirstDifference(identity), "");
}

TEST_F(JobIdentityTest, AnotherModelOrConversionIsAnotherJob) {
  const JobIdentity tiny = Of(inputs_);
  const shard::ShardIndex gqa = ConvertedIndex("gqa_bf16_mp1", 1, 0);
  JobInputs other_model = inputs_;
  other_model.shard_index = &gqa;
  EXPECT_THAT(Of(other_model).FirstDifference(ReadBack(tiny)), StartsWith("model shards differ (this job: \""));

  const shard::ShardIndex int8 = ConvertedIndex("tiny_fp32_mp1", 1, 0, DType::kQ8_0);
  JobInputs other_dtype = inputs_;
  other_dtype.shard_index = &int8;
  const std::string difference = Of(other_dtype).FirstDifference(ReadBack(tiny));
  EXPECT_THAT(difference, StartsWith("weight dtypes differ (this job: \"f32 x "));
  EXPECT_THAT(difference, HasSubstr("q8_0 x "));
  EXPECT_THAT(difference, HasSubstr("the file's: \"f32 x "));
}

// Each input that decides the answers, changed alone, is named.
TEST_F(JobIdentityTest, EveryInputIsNamed) {
  const JobIdentity base = ReadBack(Of(inputs_));
  Job other_prompts = job_;
  other_prompts.prompts[1] += " ";
  Job chat;
  chat.chat = true;
  chat.dialogs = {{{Role::kUser, "I believe the meaning of life is"}}};
  const struct {
    const char* expected;
    std::function<void(JobInputs&)> change;
  } cases[] = {
      {"tokenizers differ",
       [](JobInputs& in) { in.tokenizer_path = testing::TokenizerFixturePath("encode_golden.json"); }},
      {"devices differ", [](JobInputs& in) { in.device = "cuda"; }},
      {"--kv_cache_dtype values differ", [](JobInputs& in) { in.kv_cache_dtype = "bf16"; }},
      {"--int8_prefill values differ", [](JobInputs& in) { in.int8_prefill = !in.int8_prefill; }},
      {"--bf16_activations values differ", [](JobInputs& in) { in.bf16_activations = true; }},
      {"prompts or dialogs differ", [&](JobInputs& in) { in.job = &other_prompts; }},
      {"chat formats differ", [&](JobInputs& in) {
                                  in.job = &chat;
                                  in.chat_format = "llama2";
                                }},
      {"--temperature values differ (this job: 0.0; the file's: 0.6)", [](JobInputs& in) { in.temperature = 0; }},
      {"--top_p values differ", [](JobInputs& in) { in.top_p = 0.95; }},
      {"--typical_p values differ (this job: 0.5; the file's: 1.0)", [](JobInputs& in) { in.typical_p = 0.5; }},
      {"--max_gen_len values differ (this job: 64; the file's: -1)", [](JobInputs& in) { in.max_gen_len = 64; }},
      {"--seed values differ", [](JobInputs& in) { in.seed = 1; }},
      {"--logprobs values differ", [](JobInputs& in) { in.logprobs = true; }},
      {"--echo values differ", [](JobInputs& in) { in.echo = true; }},
      {"JSON schemas (--json_schema) differ (this job: \"", [](JobInputs& in) { in.grammar = "root ::= \"x\""; }},
  };
  for (const auto& c : cases) {
    JobInputs inputs = inputs_;
    c.change(inputs);
    EXPECT_THAT(Of(inputs).FirstDifference(base), StartsWith(c.expected)) << c.expected;
  }
}

// The context is known once the rank is planned: before, a file's context
// is left to that check; after, a different one is another job.
TEST_F(JobIdentityTest, TheContextIsComparedOncePlanned) {
  const JobIdentity planned = ReadBack(Of(inputs_).WithContext(4096));
  EXPECT_EQ(Of(inputs_).FirstDifference(planned), "");
  EXPECT_EQ(Of(inputs_).WithContext(4096).FirstDifference(planned), "");
  EXPECT_THAT(Of(inputs_).WithContext(96).FirstDifference(planned),
              StartsWith("contexts (--max_seq_len, or the model's own as the KV cache holds it) differ (this job: 96; "
                         "the file's: 4096)"));
}

TEST_F(JobIdentityTest, OnlyAnObjectOfInputsIsAJob) {
  EXPECT_THAT(std::string(JobIdentity::FromJson("0123456789abcdef").status().message()),
              HasSubstr("bare key, as older workers wrote it"));
  EXPECT_FALSE(JobIdentity::FromJson(nlohmann::json::array()).ok());
  // A field the other side lacks is a difference too (a newer worker's).
  nlohmann::json newer = Of(inputs_).fields();
  newer["speculative"] = "ngram";
  EXPECT_THAT(Of(inputs_).FirstDifference(*JobIdentity::FromJson(newer)),
              StartsWith("\"speculative\" differ (this job: not recorded; the file's: \"ngram\")"));
  JobInputs no_tokenizer = inputs_;
  no_tokenizer.tokenizer_path = "/nonexistent.model";
  EXPECT_THAT(std::string(JobIdentity::Of(no_tokenizer).status().message()), HasSubstr("/nonexistent.model"));
}

}  // namespace
}  // namespace llama
