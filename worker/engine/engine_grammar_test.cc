// The engine under a grammar (structured output): tokens only from the
// mask, stops only where the grammar may end, the end of the grammar ends
// the request, and a constrained request's tokens do not depend on what
// else runs.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "worker/engine/cache_checking_model.h"
#include "worker/engine/engine.h"

namespace llama {
namespace {

using ::llama::testing::CacheCheckingModel;
using ::testing::HasSubstr;

// Token 0 is the stop token; 1-26 are a-z; then "ab", "abc", " ", "{", "}".
std::shared_ptr<const grammar::TokenTrie> Vocabulary() {
  std::vector<std::string> bytes(32);
  for (int t = 1; t <= 26; ++t) bytes[t] = std::string(1, static_cast<char>('a' + t - 1));
  bytes[27] = "ab";
  bytes[28] = "abc";
  bytes[29] = " ";
  bytes[30] = "{";
  bytes[31] = "}";
  return grammar::TokenTrie::Build(std::move(bytes));
}

std::shared_ptr<grammar::TokenMatcher> Matcher(absl::string_view gbnf) {
  auto automaton = std::make_shared<grammar::TokenAutomaton>(*grammar::Grammar::Parse(gbnf), Vocabulary());
  return *grammar::TokenMatcher::Start(std::move(automaton));
}

struct Outcome {
  std::vector<int> tokens;
  FinishReason finish = FinishReason::kLength;
  absl::Status status;
};

EngineRequest Request(std::shared_ptr<grammar::TokenMatcher> matcher, Outcome* out, float temperature, uint64_t seed) {
  EngineRequest r;
  r.prompt = {3, 1, 4, 1, 5};
  r.max_new_tokens = 40;
  r.sampling.token.temperature = temperature;
  r.sampling.seed = seed;
  r.stop_ids = {0};
  r.grammar = std::move(matcher);
  r.sink = [out](const RequestEvent& e) {
    if (e.kind == RequestEvent::kToken) out->tokens.push_back(e.token);
    if (e.kind == RequestEvent::kFinished) {
      out->finish = e.finish;
      out->status = e.status;
    }
  };
  return r;
}

std::string Text(const std::vector<int>& tokens) {
  auto vocabulary = Vocabulary();
  std::string text;
  for (int t : tokens) text += vocabulary->bytes(t);
  return text;
}

Outcome RunWithOthers(EngineRequest (*make)(Outcome*), int others = 0) {
  CacheCheckingModel model({});
  Engine engine(&model, {});
  Outcome out;
  std::vector<Outcome> other_outcomes(others);
  EXPECT_TRUE(engine.Submit(make(&out)).ok());
  for (Outcome& o : other_outcomes) {
    EngineRequest r = Request(nullptr, &o, 1.0f, &o - other_outcomes.data());
    EXPECT_TRUE(engine.Submit(std::move(r)).ok());
  }
  EXPECT_TRUE(engine.RunUntilIdle().ok());
  return out;
}

TEST(EngineGrammarTest, AGrammarOfOneStringGivesThatString) {
  for (const float temperature : {0.0f, 1.0f}) {
    for (uint64_t seed = 0; seed < 20; ++seed) {
      CacheCheckingModel model({});
      Engine engine(&model, {});
      Outcome out;
      ASSERT_TRUE(engine.Submit(Request(Matcher(R"(root ::= "{abcab zz}")"), &out, temperature, seed)).ok());
      ASSERT_TRUE(engine.RunUntilIdle().ok());
      EXPECT_EQ(Text(out.tokens), "{abcab zz}") << "seed " << seed;
      EXPECT_EQ(out.finish, FinishReason::kStop);  // The grammar's end, with no stop token.
      EXPECT_TRUE(std::find(out.tokens.begin(), out.tokens.end(), 0) == out.tokens.end());
    }
  }
}

TEST(EngineGrammarTest, AStopComesOnlyWhereTheGrammarMayEndEvenWhenBiasedToward) {
  int stopped_early = 0;
  for (uint64_t seed = 0; seed < 30; ++seed) {
    CacheCheckingModel model({});
    Engine engine(&model, {});
    Outcome out;
    EngineRequest r = Request(Matcher("root ::= [a-c]{2,6}"), &out, 1.0f, seed);
    // The mask comes before the bias: +100 on the stop token makes it
    // certain where it is allowed, and still impossible before two letters.
    r.sampling.logit_bias = {{0, 100.0f}, {27, 50.0f}};
    ASSERT_TRUE(engine.Submit(std::move(r)).ok());
    ASSERT_TRUE(engine.RunUntilIdle().ok());
    ASSERT_EQ(out.finish, FinishReason::kStop) << out.status;
    std::vector<int> text_tokens = out.tokens;
    if (!text_tokens.empty() && text_tokens.back() == 0) text_tokens.pop_back();
    const std::string text = Text(text_tokens);
    EXPECT_GE(text.size(), 2u);
    EXPECT_LE(text.size(), 6u);
    EXPECT_EQ(text.find_first_not_of("abc"), std::string::npos) << text;
    stopped_early += out.tokens.back() == 0 && text.size() < 6;
  }
  EXPECT_GT(stopped_early, 20);  // The bias made the stop as soon as allowed.
}

EngineRequest Constrained(Outcome* out) {
  return Request(Matcher("root ::= \"{\" ([a-z] | \" \")* \"}\""), out, 1.0f, 42);
}

TEST(EngineGrammarTest, AConstrainedRequestGivesTheSameTokensAloneAndUnderLoad) {
  const Outcome alone = RunWithOthers(Constrained);
  const Outcome loaded = RunWithOthers(Constrained, /*others=*/6);
  EXPECT_EQ(alone.tokens, loaded.tokens);
  const std::string text = Text(alone.tokens.back() == 0 ? std::vector<int>(alone.tokens.begin(), alone.tokens.end() - 1)
                                                        : alone.tokens);
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text[0], '{');
}

// Speculative guesses under a grammar: vetted by it before they are
// verified, each row masked as if the guesses before it were chosen, and
// the matcher advanced only by what is kept. The answers are plain
// decoding's, token for token.
TEST(EngineGrammarTest, SpeculationKeepsAConstrainedRequestsTokens) {
  CacheCheckingModel::Shape shape;
  shape.echo_period = 4;  // Loops for the n-gram guesses to find.
  int64_t accepted = 0, proposed = 0;
  for (const float temperature : {0.0f, 1.0f}) {
    for (uint64_t seed = 0; seed < 10; ++seed) {
      std::vector<Outcome> outs(2);
      for (const int guesses : {0, 4}) {
        CacheCheckingModel model(shape);
        EngineOptions options;
        options.speculative_tokens = guesses;
        options.speculation_priced = false;  // Every guess found, whatever the steps cost here.
        Engine engine(&model, options);
        Outcome& out = outs[guesses > 0];
        // Letters and spaces by turns: each row's mask depends on the guesses before it.
        EngineRequest r = Request(Matcher("root ::= \"{\" ([a-e] \" \")* \"}\""), &out, temperature, seed);
        r.prompt = {30, 1, 29, 2, 29, 1, 29, 2};  // "{a b a b", and a loop to echo.
        ASSERT_TRUE(engine.Submit(std::move(r)).ok());
        ASSERT_TRUE(engine.RunUntilIdle().ok());
        accepted += engine.stats().accepted_tokens;
        proposed += engine.stats().proposed_tokens;
      }
      EXPECT_EQ(outs[1].tokens, outs[0].tokens) << "temperature " << temperature << ", seed " << seed;
      EXPECT_EQ(outs[1].finish, outs[0].finish);
      EXPECT_TRUE(outs[1].status.ok()) << outs[1].status;
    }
  }
  EXPECT_GT(accepted, 0);
  EXPECT_GT(proposed, accepted);
  std::printf("%lld of %lld guesses kept under the grammar\n", static_cast<long long>(accepted),
              static_cast<long long>(proposed));
}

TEST(EngineGrammarTest, AGrammarThatMatchesOnlyTheEmptyTextEndsAtOnce) {
  CacheCheckingModel model({});
  Engine engine(&model, {});
  Outcome out;
  ASSERT_TRUE(engine.Submit(Request(Matcher(R"(root ::= "")"), &out, 0.0f, 0)).ok());
  ASSERT_TRUE(engine.RunUntilIdle().ok());
  EXPECT_TRUE(out.tokens.empty());
  EXPECT_EQ(out.finish, FinishReason::kStop);
}

TEST(EngineGrammarTest, AGrammarForAnotherVocabularyIsRefused) {
  CacheCheckingModel::Shape shape;
  shape.vocab = 64;
  CacheCheckingModel model(shape);
  Engine engine(&model, {});
  Outcome out;
  absl::StatusOr<RequestId> id = engine.Submit(Request(Matcher(R"(root ::= "a")"), &out, 0.0f, 0));
  ASSERT_FALSE(id.ok());
  EXPECT_THAT(id.status().message(), HasSubstr("grammar: its token masks cover 32 tokens; the model's vocabulary has 64"));
}

}  // namespace
}  // namespace llama
