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
      r.sampling.token.temperature = i % 2 == 0 ? 0.0f : 0.9f;
      r.sampling.seed = i;
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

}  // namespace
}  // namespace llama
