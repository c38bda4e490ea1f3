#include "worker/engine/lockstep.h"

#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "worker/collectives/thread_ranks.h"
#include "worker/engine/cache_checking_model.h"
#include "worker/engine/engine.h"

namespace llama {
namespace {

using namespace std::chrono_literals;
using ::llama::testing::CacheCheckingModel;
using ::testing::HasSubstr;

// Tokens 1-26 are the letters a-z; the grammar wants 5 to 20 of them.
std::shared_ptr<grammar::TokenMatcher> LettersMatcher() {
  std::vector<std::string> bytes(32);
  for (int t = 1; t <= 26; ++t) bytes[t] = std::string(1, static_cast<char>('a' + t - 1));
  auto automaton =
      std::make_shared<grammar::TokenAutomaton>(*grammar::Grammar::Parse("root ::= [a-z]{5,20}"), grammar::TokenTrie::Build(bytes));
  return *grammar::TokenMatcher::Start(std::move(automaton));
}

// Rank 1 runs every call rank 0's engine makes, with the same chunks and
// block tables (its own cache-checking model would fail a step otherwise),
// through preemption, prefix reuse and prompt scoring, and returns when
// rank 0 stops.
TEST(LockstepTest, FollowerRunsTheLeadersSteps) {
  CacheCheckingModel::Shape shape;
  shape.blocks = 20;  // Small enough to preempt.
  CacheCheckingModel leader_model(shape), follower_model(shape);
  absl::Status follower_status = absl::UnknownError("not run");
  std::vector<std::vector<int>> outputs(6);
  testing::RunRanksOnThreads(2, [&](int rank, Communicator& comm) {
    if (rank == 1) {
      follower_status = FollowLeader(follower_model, comm);
      return;
    }
    LeaderModel leader(&leader_model, &comm);
    Engine engine(&leader, {});
    for (int i = 0; i < 6; ++i) {
      EngineRequest r;
      for (int t = 0; t < 8 + 5 * i; ++t) r.prompt.push_back(1 + (t * 5 + (i % 2)) % 31);
      r.temperature = i % 2 == 0 ? 0.0f : 0.9f;
      r.seed = i;
      r.max_new_tokens = 30;
      r.prompt_logprobs = i == 3;
      if (i == 4) r.grammar = LettersMatcher();  // Masked on rank 0 only.
      r.sink = [&outputs, i](const RequestEvent& e) {
        if (e.kind == RequestEvent::kToken) outputs[i].push_back(e.token);
      };
      ASSERT_TRUE(engine.Submit(std::move(r)).ok());
    }
    ASSERT_TRUE(leader.Heartbeat().ok());
    ASSERT_TRUE(engine.RunUntilIdle().ok());
    EXPECT_GT(engine.stats().preemptions, 0);
    EXPECT_GT(engine.stats().prefix_hit_tokens, 0);
    ASSERT_TRUE(leader.Stop().ok());
  }, std::chrono::seconds(5));
  EXPECT_TRUE(follower_status.ok()) << follower_status;
  EXPECT_EQ(follower_model.steps, leader_model.steps);
  EXPECT_GT(leader_model.steps.size(), 10u);
  for (const auto& tokens : outputs) EXPECT_FALSE(tokens.empty());
  EXPECT_GE(outputs[4].size(), 5u);
  for (int t : outputs[4]) EXPECT_TRUE(t >= 1 && t <= 26) << t;
}

// A leader that goes away without a word ends the follower with the
// collective's error, within its deadline, not a hang.
TEST(LockstepTest, FollowerReturnsWhenTheLeaderIsGone) {
  CacheCheckingModel model({});
  absl::Status follower_status;
  const auto start = std::chrono::steady_clock::now();
  testing::RunRanksOnThreads(
      2,
      [&](int rank, Communicator& comm) {
        if (rank == 1) follower_status = FollowLeader(model, comm);
        // Rank 0 returns at once: its sockets close.
      },
      std::chrono::seconds(5), /*finish=*/false);
  EXPECT_FALSE(follower_status.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

TEST(LockstepTest, StepMessagesRoundTrip) {
  const std::vector<int> a = {1, 2, 3}, b = {9};
  const std::vector<int32_t> ta = {4, 5}, tb = {7, 0, 3};
  const std::vector<SequenceChunk> chunks = {{ta, 0, a, true}, {tb, 40, b, false}};
  const std::vector<LogitAdjustment> adjustments = {{5, -1.5f}, {2, 100.0f}};
  const std::vector<uint64_t> mask = {0x5};
  const std::vector<TokenChoice> choices = {{0.0f, 1.0f, 0.0, 0, 0, 0.0f, {}, nullptr, {}},
                                            {0.7f, 0.9f, 0.25, 3, 40, 0.05f, adjustments, mask.data(), {}}};
  DecodedStep step;
  ASSERT_TRUE(DecodeStep(EncodeStep(chunks, choices), true, step).ok());
  ASSERT_EQ(step.chunks.size(), 2u);
  EXPECT_EQ(step.tokens[0], a);
  EXPECT_EQ(step.blocks[1], tb);
  EXPECT_EQ(step.chunks[1].start_pos, 40);
  EXPECT_TRUE(step.chunks[0].all_logits);
  EXPECT_FALSE(step.chunks[1].all_logits);
  EXPECT_EQ(std::vector<int>(step.chunks[0].tokens.begin(), step.chunks[0].tokens.end()), a);
  EXPECT_EQ(step.choices[1].temperature, 0.7f);
  EXPECT_EQ(step.choices[1].uniform, 0.25);
  EXPECT_EQ(step.choices[1].top_logprobs, 3);
  EXPECT_EQ(step.choices[1].top_k, 40);
  EXPECT_EQ(step.choices[1].min_p, 0.05f);
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

TEST(LockstepTest, MalformedMessagesNameWhatDoesNotFit) {
  const std::vector<int> a = {1, 2, 3};
  const std::vector<int32_t> t = {4};
  const std::string good = EncodeStep({{t, 0, a, false}}, {{0.5f, 1.0f, 0.5, 0, 0, 0.0f, {}, nullptr, {}}});
  DecodedStep step;
  EXPECT_THAT(DecodeStep(good.substr(0, good.size() - 1), true, step).message(),
              HasSubstr("a token choice's mask flag (1 bytes at byte"));
  EXPECT_THAT(DecodeStep(good.substr(0, good.size() - 4), true, step).message(),
              HasSubstr("a token choice's adjustment count (8 bytes at byte"));
  EXPECT_THAT(DecodeStep(good.substr(0, good.size() - 12), true, step).message(),
              HasSubstr("a token choice's min_p (4 bytes at byte"));
  EXPECT_THAT(DecodeStep(good.substr(0, good.size() - 20), true, step).message(),
              HasSubstr("a token choice's top_logprobs (4 bytes at byte"));
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
