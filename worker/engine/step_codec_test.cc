#include "worker/engine/step_codec.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_format.h"

namespace llama {
namespace {

using ::testing::HasSubstr;

TEST(StepCodecTest, HeadersRoundTrip) {
  for (StepKind kind : {StepKind::kForward, StepKind::kForwardAndChoose, StepKind::kHeartbeat, StepKind::kStop}) {
    for (int64_t bytes : {int64_t{0}, int64_t{25}, kMaxStepMessageBytes}) {
      const absl::StatusOr<StepHeader> header = DecodeStepHeader(EncodeStepHeader({kind, bytes}));
      ASSERT_TRUE(header.ok()) << header.status();
      EXPECT_EQ(header->kind, kind);
      EXPECT_EQ(header->bytes, bytes);
    }
  }
}

// A rank of another build (another layout) fails at its first step naming
// both versions; so does a header from before versions (kind, bytes).
TEST(StepCodecTest, AnotherVersionOrABadHeaderIsRefused) {
  EncodedStepHeader newer = EncodeStepHeader({StepKind::kForward, 100});
  newer[0] += 1;
  EXPECT_THAT(DecodeStepHeader(newer).status().message(),
              HasSubstr(absl::StrFormat("lockstep version %d (tag 0x4c4b5354), this rank speaks version %d",
                                        kStepCodecVersion + 1, kStepCodecVersion)));
  EXPECT_THAT(DecodeStepHeader({2, 100, 0}).status().message(), HasSubstr("lockstep version 2 (tag 0)"));
  EXPECT_THAT(DecodeStepHeader({kStepCodecTag << 32 | kStepCodecVersion, 9, 0}).status().message(),
              HasSubstr("unknown kind 9"));
  EXPECT_THAT(
      DecodeStepHeader({kStepCodecTag << 32 | kStepCodecVersion, 1, kMaxStepMessageBytes + 1}).status().message(),
      HasSubstr("bytes (at most"));
  EXPECT_THAT(DecodeStepHeader({kStepCodecTag << 32 | kStepCodecVersion, 1, -1}).status().message(),
              HasSubstr("-1 bytes"));
}

TEST(StepCodecTest, StepMessagesRoundTrip) {
  const std::vector<int> a = {1, 2, 3}, b = {9};
  const std::vector<int32_t> ta = {4, 5}, tb = {7, 0, 3};
  const std::vector<SequenceChunk> chunks = {{ta, 0, a, true}, {tb, 40, b, false}};
  const std::vector<LogitAdjustment> adjustments = {{5, -1.5f}, {2, 100.0f}};
  const std::vector<uint64_t> mask = {0x5};
  TokenSampling sampled;
  sampled.temperature = 0.7f;
  sampled.top_p = 0.9f;
  sampled.top_k = 40;
  sampled.min_p = 0.05f;
  const std::vector<TokenChoice> choices = {{TokenSampling::Greedy(), 0.0, 0, {}, nullptr, {}},
                                            {sampled, 0.25, 3, adjustments, mask.data(), {}}};
  DecodedStep step;
  ASSERT_TRUE(DecodeStep(EncodeStep(chunks, choices), true, step).ok());
  ASSERT_EQ(step.chunks.size(), 2u);
  EXPECT_EQ(step.tokens[0], a);
  EXPECT_EQ(step.blocks[1], tb);
  EXPECT_EQ(step.chunks[1].start_pos, 40);
  EXPECT_TRUE(step.chunks[0].all_logits);
  EXPECT_FALSE(step.chunks[1].all_logits);
  EXPECT_EQ(std::vector<int>(step.chunks[0].tokens.begin(), step.chunks[0].tokens.end()), a);
  EXPECT_EQ(step.choices[0].sampling.temperature, 0.0f);
  EXPECT_EQ(step.choices[1].sampling.temperature, 0.7f);
  EXPECT_EQ(step.choices[1].sampling.top_p, 0.9f);
  EXPECT_EQ(step.choices[1].uniform, 0.25);
  EXPECT_EQ(step.choices[1].top_logprobs, 3);
  EXPECT_EQ(step.choices[1].sampling.top_k, 40);
  EXPECT_EQ(step.choices[1].sampling.min_p, 0.05f);
  EXPECT_TRUE(step.choices[0].adjustments.empty());
  ASSERT_EQ(step.choices[1].adjustments.size(), 2u);
  EXPECT_EQ(step.choices[1].adjustments[0].token, 5);
  EXPECT_EQ(step.choices[1].adjustments[0].delta, -1.5f);
  EXPECT_EQ(step.choices[1].adjustments[1].token, 2);
  EXPECT_EQ(step.choices[1].adjustments[1].delta, 100.0f);
  // A mask stays with rank 0's sampler; the followers learn only that there was one.
  EXPECT_EQ(step.masked, (std::vector<bool>{false, true}));
  EXPECT_EQ(step.choices[1].allowed, nullptr);
}

// Speculative decoding: a chunk's proposed tokens travel with it, and a
// choice comes for each of its last proposed + 1 rows.
TEST(StepCodecTest, ProposedTokensTravelWithAChoiceForEachRow) {
  const std::vector<int> a = {7, 8, 9, 10}, b = {3};
  const std::vector<int32_t> t = {1, 2};
  SequenceChunk verify{t, 12, a, false};
  verify.proposed = 3;
  const std::vector<SequenceChunk> chunks = {verify, {t, 5, b, false}};
  std::vector<TokenChoice> choices(5);
  for (size_t i = 0; i < choices.size(); ++i) choices[i].uniform = 0.125 * static_cast<double>(i);
  DecodedStep step;
  ASSERT_TRUE(DecodeStep(EncodeStep(chunks, choices), true, step).ok());
  ASSERT_EQ(step.chunks.size(), 2u);
  EXPECT_EQ(step.chunks[0].proposed, 3);
  EXPECT_EQ(step.chunks[1].proposed, 0);
  ASSERT_EQ(step.choices.size(), 5u);
  EXPECT_EQ(step.choices[4].uniform, 0.5);

  // More proposed tokens than the chunk has is a bad message.
  std::string bad = EncodeStep(chunks, choices);
  bad[33] = '\x04';  // The first chunk's proposed count (after n and 3 i64 and a u8).
  EXPECT_THAT(DecodeStep(bad, true, step).message(), HasSubstr("chunk 0 has 4 proposed tokens of 4"));
  // A choice short: the message ends inside the last one.
  choices.pop_back();
  EXPECT_THAT(DecodeStep(EncodeStep(chunks, choices), true, step).message(), HasSubstr("a token choice's"));
}

TEST(StepCodecTest, MalformedMessagesNameWhatDoesNotFit) {
  const std::vector<int> a = {1, 2, 3};
  const std::vector<int32_t> t = {4};
  TokenSampling sampled;
  sampled.temperature = 0.5f;
  sampled.top_p = 1.0f;
  const std::string good = EncodeStep({{t, 0, a, false}}, {{sampled, 0.5, 0, {}, nullptr, {}}});
  DecodedStep step;
  EXPECT_THAT(DecodeStep(good.substr(0, good.size() - 1), true, step).message(),
              HasSubstr("a token choice's mask flag (1 bytes at byte"));
  EXPECT_THAT(DecodeStep(good.substr(0, good.size() - 4), true, step).message(),
              HasSubstr("a token choice's adjustment count (8 bytes at byte"));
  EXPECT_THAT(DecodeStep(good.substr(0, good.size() - 12), true, step).message(),
              HasSubstr("a token choice's top_logprobs (4 bytes at byte"));
  EXPECT_THAT(DecodeStep(good.substr(0, good.size() - 20), true, step).message(),
              HasSubstr("a token choice's random number (8 bytes at byte"));
  EXPECT_THAT(DecodeStep(good.substr(0, good.size() - 30), true, step).message(),
              HasSubstr(absl::StrFormat("a token choice's sampling parameters (%d bytes at byte",
                                        sizeof(TokenSampling))));
  std::string many = good;
  many[many.size() - 2] = '\x01';  // The adjustment count's top byte: more than the message holds.
  EXPECT_THAT(DecodeStep(many, true, step).message(), HasSubstr("choice 0 has"));
  EXPECT_THAT(DecodeStep(good, false, step).message(), HasSubstr("bytes left over"));
  EXPECT_THAT(DecodeStep(good.substr(0, 4), true, step).message(), HasSubstr("the chunk count"));
  std::string huge = good;
  huge[0] = '\x7f';
  EXPECT_THAT(DecodeStep(huge, true, step).message(), HasSubstr("chunks in"));
  std::string bad_count = good;
  bad_count[16] = '\xff';  // The first chunk's token count.
  EXPECT_THAT(DecodeStep(bad_count, true, step).message(), HasSubstr("chunk 0 has"));
}

}  // namespace
}  // namespace llama
