#include "worker/engine/engine.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "worker/engine/cache_checking_model.h"

namespace llama {
namespace {

using ::llama::testing::CacheCheckingModel;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// What a request's sink received.
struct Outcome {
  std::vector<int> tokens;
  std::vector<float> logprobs;
  std::vector<float> prompt_logprobs;
  std::vector<TopToken> prompt_top;
  bool prompt_logprobs_before_tokens = true;
  int finishes = 0;
  int scheduled = 0;
  FinishReason finish = FinishReason::kLength;
  absl::Status status;
};

EngineRequest Request(std::vector<int> prompt, Outcome* out, int64_t max_new_tokens = 8, float temperature = 0.0f,
                      uint64_t seed = 0) {
  EngineRequest r;
  r.prompt = std::move(prompt);
  r.max_new_tokens = max_new_tokens;
  r.sampling.token.temperature = temperature;
  r.sampling.token.top_p = 0.9f;
  r.sampling.seed = seed;
  r.stop_ids = {0};
  r.sink = [out](const RequestEvent& e) {
    switch (e.kind) {
      case RequestEvent::kPromptLogprobs:
        out->prompt_logprobs.assign(e.prompt_logprobs.begin(), e.prompt_logprobs.end());
        out->prompt_top.assign(e.prompt_top.begin(), e.prompt_top.end());
        out->prompt_logprobs_before_tokens = out->tokens.empty();
        break;
      case RequestEvent::kToken:
        out->tokens.push_back(e.token);
        out->logprobs.push_back(e.logprob);
        break;
      case RequestEvent::kFinished:
        ++out->finishes;
        out->finish = e.finish;
        out->status = e.status;
        break;
      case RequestEvent::kScheduled:
        ++out->scheduled;
        break;
    }
  };
  return r;
}

std::vector<int> Prompt(int length, int salt) {
  std::vector<int> p(length);
  for (int i = 0; i < length; ++i) p[i] = 1 + (i * 7 + salt * 13) % 31;
  return p;
}

// The request alone on a fresh engine with room to spare.
Outcome Solo(const EngineRequest& request, CacheCheckingModel::Shape shape) {
  shape.blocks = 4 * shape.max_batch_size * shape.max_seq_len / shape.block_size;
  CacheCheckingModel model(shape);
  Engine engine(&model, {});
  Outcome out;
  EngineRequest copy = request;
  copy.sink = Request({}, &out).sink;
  EXPECT_TRUE(engine.Submit(std::move(copy)).ok());
  EXPECT_TRUE(engine.RunUntilIdle().ok());
  return out;
}

// No block held twice except cached prefix blocks, which are held exactly
// by the requests that name them.
void ExpectBlocksConsistent(const Engine& engine) {
  ASSERT_TRUE(engine.block_pool().CheckConsistency().ok()) << engine.block_pool().CheckConsistency();
  std::map<int32_t, int> holders;
  for (const auto& table : engine.running_block_tables()) {
    for (int32_t b : table) ++holders[b];
  }
  for (const auto& [block, count] : holders) {
    ASSERT_EQ(engine.block_pool().references(block), count) << "block " << block;
  }
}

TEST(EngineTest, GreedyRequestStopsAtItsLimitOrStopToken) {
  CacheCheckingModel model({});
  Engine engine(&model, {});
  Outcome a, b;
  ASSERT_TRUE(engine.Submit(Request(Prompt(5, 1), &a, 6)).ok());
  ASSERT_TRUE(engine.Submit(Request(Prompt(9, 2), &b, 60)).ok());
  ASSERT_TRUE(engine.RunUntilIdle().ok());
  EXPECT_EQ(a.finishes, 1);
  EXPECT_TRUE((a.finish == FinishReason::kLength && a.tokens.size() == 6u) ||
              (a.finish == FinishReason::kStop && a.tokens.back() == 0 && a.tokens.size() <= 6u));
  // b's limit is the context: 64 positions.
  EXPECT_TRUE((b.finish == FinishReason::kLength && b.tokens.size() == 64u - 9u) ||
              (b.finish == FinishReason::kStop && b.tokens.back() == 0 && b.tokens.size() <= 64u - 9u));
  EXPECT_EQ(engine.block_pool().in_use(), 0);
  EXPECT_EQ(engine.stats().generated_tokens, static_cast<int64_t>(a.tokens.size() + b.tokens.size()));
}

TEST(EngineTest, DecodesGoFirstAndPromptsFillTheBudgetInPieces) {
  CacheCheckingModel model({});
  EngineOptions options;
  options.max_num_batched_tokens = 8;
  Engine engine(&model, options);
  Outcome a, b, c;
  EngineRequest ra = Request(Prompt(3, 1), &a, 30), rb = Request(Prompt(4, 2), &b, 30);
  ra.stop_ids.clear();  // Decoding all along.
  rb.stop_ids.clear();
  ASSERT_TRUE(engine.Submit(ra).ok());
  ASSERT_TRUE(engine.Submit(rb).ok());
  ASSERT_TRUE(engine.Step().ok());  // Both prompts in one step: 3 + 4 tokens.
  EXPECT_THAT(model.steps.back(), ElementsAre(3, 4));
  ASSERT_TRUE(engine.Submit(Request(Prompt(20, 3), &c, 4)).ok());
  ASSERT_TRUE(engine.Step().ok());
  // Two decodes first, then 6 of the long prompt's 20 tokens; then 6, 6, 2.
  EXPECT_THAT(model.steps.back(), ElementsAre(1, 1, 6));
  ASSERT_TRUE(engine.Step().ok());
  EXPECT_THAT(model.steps.back(), ElementsAre(1, 1, 6));
  ASSERT_TRUE(engine.Step().ok());
  ASSERT_TRUE(engine.Step().ok());
  EXPECT_THAT(model.steps.back(), ElementsAre(1, 1, 2));
  ASSERT_TRUE(engine.RunUntilIdle().ok());
  // Pieces change nothing: each request's tokens are its solo run's.
  EXPECT_EQ(a.tokens, Solo(ra, {}).tokens);
  EXPECT_EQ(b.tokens, Solo(rb, {}).tokens);
  EXPECT_EQ(c.tokens, Solo(Request(Prompt(20, 3), nullptr, 4), {}).tokens);
}

TEST(EngineTest, RequestWaitsUntilItsBlocksAreFree) {
  CacheCheckingModel::Shape shape;
  shape.blocks = 16;  // 64 positions: one full-length sequence.
  CacheCheckingModel model(shape);
  Engine engine(&model, {});
  Outcome a, b;
  ASSERT_TRUE(engine.Submit(Request(Prompt(40, 1), &a, 4)).ok());
  ASSERT_TRUE(engine.Submit(Request(Prompt(40, 2), &b, 4)).ok());
  ASSERT_TRUE(engine.Step().ok());
  EXPECT_EQ(engine.stats().running, 1);
  EXPECT_EQ(engine.stats().waiting, 1);
  ASSERT_TRUE(engine.RunUntilIdle().ok());
  EXPECT_EQ(a.finishes, 1);
  EXPECT_EQ(b.finishes, 1);
  EXPECT_EQ(b.tokens, Solo(Request(Prompt(40, 2), nullptr, 4), shape).tokens);
}

TEST(EngineTest, PoolRunningDryPreemptsTheNewestAndItsOutputIsUnchanged) {
  CacheCheckingModel::Shape shape;
  shape.blocks = 16;
  CacheCheckingModel model(shape);
  Engine engine(&model, {});
  std::vector<Outcome> outs(3);
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 3; ++i) {
    requests.push_back(Request(Prompt(10, i + 5), &outs[i], 40, 0.8f, 100 + i));
    requests.back().stop_ids.clear();  // Run to the limit: the pool must run dry.
    ASSERT_TRUE(engine.Submit(requests.back()).ok());
  }
  while (!engine.idle()) {
    ASSERT_TRUE(engine.Step().ok());
    ExpectBlocksConsistent(engine);
  }
  EXPECT_GT(engine.stats().preemptions, 0);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(outs[i].tokens.size(), 40u);
    const Outcome solo = Solo(requests[i], shape);
    EXPECT_EQ(outs[i].tokens, solo.tokens) << i;
    EXPECT_EQ(outs[i].logprobs, solo.logprobs) << i;
  }
}

TEST(EngineTest, SharedPromptPrefixIsComputedOnce) {
  CacheCheckingModel model({});
  Engine engine(&model, {});
  std::vector<int> system = Prompt(21, 4);  // Five full blocks of 4.
  std::vector<int> first = system, second = system;
  first.push_back(5);
  second.push_back(6);
  Outcome a, b;
  ASSERT_TRUE(engine.Submit(Request(first, &a, 3)).ok());
  ASSERT_TRUE(engine.RunUntilIdle().ok());
  const int64_t computed = engine.stats().computed_tokens;
  ASSERT_TRUE(engine.Submit(Request(second, &b, 3)).ok());
  ASSERT_TRUE(engine.RunUntilIdle().ok());
  EXPECT_EQ(engine.stats().prefix_hit_tokens, 20);
  // The second request computed its last two prompt tokens and its decodes.
  EXPECT_EQ(engine.stats().computed_tokens - computed, 2 + static_cast<int64_t>(b.tokens.size()) - 1);
  EXPECT_EQ(b.tokens, Solo(Request(second, nullptr, 3), {}).tokens);

  // Off: nothing is reused.
  CacheCheckingModel cold_model({});
  EngineOptions off;
  off.prefix_caching = false;
  Engine cold(&cold_model, off);
  Outcome c, d;
  ASSERT_TRUE(cold.Submit(Request(first, &c, 3)).ok());
  ASSERT_TRUE(cold.Submit(Request(second, &d, 3)).ok());
  ASSERT_TRUE(cold.RunUntilIdle().ok());
  EXPECT_EQ(cold.stats().prefix_hit_tokens, 0);
  EXPECT_EQ(d.tokens, b.tokens);
}

TEST(EngineTest, CancelledRequestStopsAtTheNextStepAndFreesItsBlocks) {
  CacheCheckingModel model({});
  Engine engine(&model, {});
  Outcome a, b;
  EngineRequest ra = Request(Prompt(6, 1), &a, 50);
  ra.stop_ids.clear();
  absl::StatusOr<RequestId> id = engine.Submit(ra);
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(engine.Step().ok());
  ASSERT_TRUE(engine.Step().ok());
  EXPECT_EQ(a.tokens.size(), 2u);
  engine.Cancel(*id);
  ASSERT_TRUE(engine.Step().ok());
  EXPECT_EQ(a.tokens.size(), 2u);
  EXPECT_EQ(a.finishes, 1);
  EXPECT_EQ(a.finish, FinishReason::kCancelled);
  EXPECT_EQ(engine.block_pool().in_use(), 0);
  // A waiting request cancelled before it ran costs nothing.
  absl::StatusOr<RequestId> waiting = engine.Submit(Request(Prompt(6, 2), &b, 5));
  engine.Cancel(*waiting);
  engine.Cancel(12345);  // Unknown: ignored.
  const size_t steps = model.steps.size();
  ASSERT_TRUE(engine.RunUntilIdle().ok());
  EXPECT_EQ(model.steps.size(), steps);
  EXPECT_TRUE(b.tokens.empty());
  EXPECT_EQ(b.finish, FinishReason::kCancelled);
}

TEST(EngineTest, PromptLogprobsComeOnceBeforeTheTokensAndMatchASoloRun) {
  CacheCheckingModel model({});
  EngineOptions options;
  options.max_num_batched_tokens = 8;  // The 20-token prompt is scored in pieces.
  Engine engine(&model, options);
  Outcome a, b, c, d;
  EngineRequest ra = Request(Prompt(20, 1), &a, 4), rb = Request(Prompt(1, 2), &b, 2),
                rc = Request(Prompt(6, 3), &c, 0), rd = Request(Prompt(5, 4), &d, 3);
  for (EngineRequest* r : {&ra, &rb, &rc}) r->prompt_logprobs = true;
  for (EngineRequest* r : {&rd, &ra, &rb, &rc}) ASSERT_TRUE(engine.Submit(*r).ok());
  ASSERT_TRUE(engine.RunUntilIdle().ok());
  ASSERT_EQ(a.prompt_logprobs.size(), 20u);
  EXPECT_EQ(a.prompt_logprobs[0], 0.0f);
  EXPECT_TRUE(a.prompt_logprobs_before_tokens);
  EXPECT_EQ(a.prompt_logprobs, Solo(ra, {}).prompt_logprobs);
  EXPECT_EQ(a.tokens, Solo(ra, {}).tokens);
  EXPECT_THAT(b.prompt_logprobs, ElementsAre(0.0f));
  EXPECT_TRUE(b.prompt_logprobs_before_tokens);
  EXPECT_EQ(b.tokens, Solo(rb, {}).tokens);
  // No tokens to generate, the prompt still scored.
  EXPECT_EQ(c.prompt_logprobs.size(), 6u);
  EXPECT_TRUE(c.tokens.empty());
  EXPECT_EQ(c.finish, FinishReason::kLength);
  EXPECT_TRUE(d.prompt_logprobs.empty());
}

std::vector<std::pair<int, float>> Pairs(const std::vector<TopToken>& top) {
  std::vector<std::pair<int, float>> pairs;
  for (const TopToken& t : top) pairs.emplace_back(t.token, t.logprob);
  return pairs;
}

// With top_logprobs, each prompt position also ranks the tokens that could
// have stood there: those of one forward pass over the whole prompt, though
// the engine scores it in pieces beside another request.
TEST(EngineTest, PromptPositionsRankTheirMostLikelyTokens) {
  constexpr int kTop = 3;
  CacheCheckingModel model({});
  EngineOptions options;
  options.max_num_batched_tokens = 8;
  Engine engine(&model, options);
  Outcome a, b;
  EngineRequest ra = Request(Prompt(20, 1), &a, 2), rb = Request(Prompt(9, 2), &b, 2);
  ra.prompt_logprobs = rb.prompt_logprobs = true;
  ra.top_logprobs = kTop;
  ASSERT_TRUE(engine.Submit(rb).ok());
  ASSERT_TRUE(engine.Submit(ra).ok());
  ASSERT_TRUE(engine.RunUntilIdle().ok());
  EXPECT_TRUE(b.prompt_top.empty());
  ASSERT_EQ(a.prompt_top.size(), 20u * kTop);

  CacheCheckingModel whole({});
  const std::vector<std::vector<int32_t>> tables = SlotBlockTables(whole, 1);
  const SequenceChunk chunk{tables[0], 0, ra.prompt, /*all_logits=*/true};
  absl::StatusOr<absl::Span<const float>> logits = whole.Forward({chunk});
  ASSERT_TRUE(logits.ok()) << logits.status();
  const int64_t vocab = whole.limits().vocab_size;
  for (int p = 1; p < 20; ++p) {
    int ids[kTop];
    float logprobs[kTop];
    TopLogProbs(logits->data() + (p - 1) * vocab, vocab, kTop, ids, logprobs);
    for (int j = 0; j < kTop; ++j) {
      EXPECT_EQ(a.prompt_top[p * kTop + j].token, ids[j]) << p << " " << j;
      EXPECT_EQ(a.prompt_top[p * kTop + j].logprob, logprobs[j]) << p << " " << j;
      // The prompt token's own log-probability, where it is among them, is
      // the same number (clients compare the two for greediness).
      if (ids[j] == ra.prompt[p]) {
        EXPECT_EQ(a.prompt_logprobs[p], logprobs[j]) << p;
      }
    }
  }
  EXPECT_EQ(Pairs(a.prompt_top), Pairs(Solo(ra, {}).prompt_top));
}

TEST(EngineTest, BadRequestsNameTheField) {
  CacheCheckingModel model({});
  Engine engine(&model, {});
  Outcome out;
  EXPECT_EQ(engine.Submit(Request({}, &out)).status().message(), "prompt is empty: expected at least one token");
  EXPECT_EQ(engine.Submit(Request(Prompt(65, 1), &out)).status().message(),
            "prompt has 65 tokens, more than the context of 64");
  EXPECT_EQ(engine.Submit(Request({1, 32}, &out)).status().message(),
            "prompt: token id 32 outside the vocabulary [0, 32)");
  EXPECT_EQ(engine.Submit(Request({1}, &out, 8, -1.0f)).status().message(),
            "temperature: -1 is out of range [0, 2]");
  EngineRequest r = Request({1}, &out);
  r.sampling.token.top_p = 0;
  EXPECT_EQ(engine.Submit(r).status().message(), "top_p: 0 is out of range (0, 1]");
  EXPECT_EQ(engine.Submit(Request({1}, &out, -2)).status().message(), "max_new_tokens -2: expected >= 0");
  r = Request({1}, &out);
  r.min_new_tokens = 9;
  EXPECT_EQ(engine.Submit(r).status().message(), "min_new_tokens 9: expected 0 to max_new_tokens (8)");
  r = Request({1}, &out);
  r.stop_ids = {32};
  EXPECT_EQ(engine.Submit(r).status().message(), "stop ids: token id 32 outside the vocabulary [0, 32)");
  r = Request({1}, &out);
  r.sampling.token.top_k = -1;
  EXPECT_EQ(engine.Submit(r).status().message(), "top_k: -1 is out of range [0, 2147483647]");
  r = Request({1}, &out);
  r.sampling.token.min_p = 1.5f;
  EXPECT_EQ(engine.Submit(r).status().message(), "min_p: 1.5 is out of range [0, 1]");
  r = Request({1}, &out);
  r.sampling.frequency_penalty = 2.5f;
  EXPECT_EQ(engine.Submit(r).status().message(), "frequency_penalty: 2.5 is out of range [-2, 2]");
  r = Request({1}, &out);
  r.sampling.logit_bias = {{32, 1.0f}};
  EXPECT_EQ(engine.Submit(r).status().message(), "logit_bias: token id 32 outside the vocabulary [0, 32)");
  r.sampling.logit_bias = {{3, -101.0f}};
  EXPECT_EQ(engine.Submit(r).status().message(), "logit_bias: -101 for token 3 is out of range [-100, 100]");
}

// top_k 1, or min_p 1, leaves only the most likely token: sampling at any
// temperature then gives the greedy tokens.
TEST(EngineTest, TopKOneAndMinPOneSampleTheGreedyTokens) {
  CacheCheckingModel::Shape shape;
  Outcome greedy = Solo(Request(Prompt(6, 4), nullptr, 16), shape);
  ASSERT_FALSE(greedy.tokens.empty());
  for (const auto& [top_k, min_p] : {std::pair<int, float>{1, 0.0f}, {0, 1.0f}}) {
    EngineRequest r = Request(Prompt(6, 4), nullptr, 16, /*temperature=*/1.5f, /*seed=*/9);
    r.sampling.token.top_k = top_k;
    r.sampling.token.min_p = min_p;
    EXPECT_EQ(Solo(r, shape).tokens, greedy.tokens) << "top_k " << top_k << ", min_p " << min_p;
  }
  EngineRequest sampled = Request(Prompt(6, 4), nullptr, 16, 1.5f, 9);
  EXPECT_NE(Solo(sampled, shape).tokens, greedy.tokens) << "plain sampling gave the greedy tokens: nothing is checked";
}

// min_new_tokens holds every stop id back until that many tokens: a request
// whose greedy run stops early runs on, its first tokens the greedy ones
// up to the stop, then the best non-stop token.
TEST(EngineTest, MinNewTokensHoldsTheStopIdsBack) {
  CacheCheckingModel::Shape shape;
  // The stop id each greedy run would end on: its own last token.
  EngineRequest probe = Request(Prompt(5, 3), nullptr, 12);
  probe.stop_ids.clear();
  const std::vector<int> free_run = Solo(probe, shape).tokens;
  ASSERT_EQ(free_run.size(), 12u);
  EngineRequest r = Request(Prompt(5, 3), nullptr, 12);
  r.stop_ids = {free_run[2]};  // Greedy stops after three tokens.
  ASSERT_EQ(Solo(r, shape).tokens.size(), 3u);
  r.min_new_tokens = 6;
  const Outcome held = Solo(r, shape);
  ASSERT_GE(held.tokens.size(), 6u);
  EXPECT_EQ(std::vector<int>(held.tokens.begin(), held.tokens.begin() + 2),
            std::vector<int>(free_run.begin(), free_run.begin() + 2));
  for (int i = 0; i < 6; ++i) EXPECT_NE(held.tokens[i], free_run[2]) << "token " << i;
}

// Each greedy token is the argmax of the model's logits for the sequence so
// far plus the request's logit_bias, less frequency_penalty per earlier
// occurrence among the generated tokens and presence_penalty once; the
// log-probability reported is the model's own. The model's logits come from
// a fresh model fed the whole sequence.
TEST(EngineTest, PenaltiesAndLogitBiasMoveTheChoiceNotTheLogprobs) {
  CacheCheckingModel::Shape shape;
  shape.blocks = 4 * shape.max_batch_size * shape.max_seq_len / shape.block_size;
  CacheCheckingModel model(shape);
  Engine engine(&model, {});
  Outcome out;
  EngineRequest r = Request(Prompt(5, 2), &out, 24);
  r.stop_ids.clear();
  r.sampling.frequency_penalty = 1.5f;
  r.sampling.presence_penalty = 0.5f;
  r.sampling.logit_bias = {{3, 2.5f}, {7, -100.0f}, {3, 0.25f}};
  const std::vector<int> prompt = r.prompt;
  ASSERT_TRUE(engine.Submit(std::move(r)).ok());
  ASSERT_TRUE(engine.RunUntilIdle().ok());
  ASSERT_EQ(out.tokens.size(), 24u);

  std::vector<int> sequence = prompt;
  std::map<int, int> counts;
  int moved = 0;  // Steps where the adjustments changed the choice.
  for (size_t i = 0; i < out.tokens.size(); ++i) {
    CacheCheckingModel fresh(shape);
    const std::vector<int32_t> table = SlotBlockTables(fresh, 1)[0];
    absl::StatusOr<absl::Span<const float>> logits = fresh.Forward({{table, 0, sequence, false}});
    ASSERT_TRUE(logits.ok());
    std::vector<float> adjusted(logits->begin(), logits->end());
    adjusted[3] += 2.75f;
    adjusted[7] -= 100.0f;
    for (const auto& [token, count] : counts) adjusted[token] -= 1.5f * count + 0.5f;
    const int expected = static_cast<int>(std::max_element(adjusted.begin(), adjusted.end()) - adjusted.begin());
    EXPECT_EQ(out.tokens[i], expected) << "token " << i;
    EXPECT_FLOAT_EQ(out.logprobs[i], LogProb(logits->data(), shape.vocab, out.tokens[i])) << "token " << i;
    moved += expected != static_cast<int>(std::max_element(logits->begin(), logits->end()) - logits->begin());
    ++counts[out.tokens[i]];
    sequence.push_back(out.tokens[i]);
  }
  EXPECT_GT(moved, 0) << "the adjustments never changed a token: the test checks nothing";
  EXPECT_EQ(counts.count(7), 0u);
}

TEST(EngineTest, AModelErrorEndsEveryRequestAndTheEngine) {
  CacheCheckingModel model({});
  model.fail_at_step = 2;
  Engine engine(&model, {});
  Outcome a, b;
  ASSERT_TRUE(engine.Submit(Request(Prompt(5, 1), &a, 30)).ok());
  ASSERT_TRUE(engine.Step().ok());
  ASSERT_TRUE(engine.Submit(Request(Prompt(5, 2), &b, 30)).ok());
  ASSERT_TRUE(engine.Step().ok());
  EXPECT_EQ(engine.Step().message(), "rank 1 is gone");
  for (const Outcome* o : {&a, &b}) {
    EXPECT_EQ(o->finishes, 1);
    EXPECT_EQ(o->finish, FinishReason::kError);
    EXPECT_EQ(o->status.message(), "rank 1 is gone");
  }
  EXPECT_THAT(engine.Submit(Request(Prompt(5, 3), &a)).status().message(), HasSubstr("the engine failed"));
  EXPECT_EQ(engine.Step().message(), "rank 1 is gone");
}

// A draft model that computes what the target does guesses right every
// time for greedy requests: every guess verified is kept (a draft cache
// left stale by a rejection, a preemption or a pool run dry would guess
// wrong and show here), and the answers are the solo runs'. The draft's
// pool (80 positions for up to 8 requests of up to 54) is smaller than the
// drafts could fill, and the target's pool preempts.
TEST(EngineTest, ADraftModelThatIsTheTargetHasEveryGuessKept) {
  CacheCheckingModel::Shape shape;
  shape.blocks = 24;
  CacheCheckingModel model(shape);
  CacheCheckingModel::Shape draft_shape = shape;
  draft_shape.blocks = 20;  // 80 positions for up to 8 requests.
  CacheCheckingModel draft(draft_shape);
  EngineOptions options;
  options.max_num_batched_tokens = 12;
  options.speculative_tokens = 3;
  options.draft_model = &draft;
  options.speculation_priced = false;
  Engine engine(&model, options);
  const int n = 12;
  std::vector<Outcome> outs(n);
  std::vector<EngineRequest> requests;
  for (int i = 0; i < n; ++i) {
    requests.push_back(Request(Prompt(3 + i * 2, i), &outs[i], 10 + i * 3));
    ASSERT_TRUE(engine.Submit(requests.back()).ok());
  }
  for (int step = 0; !engine.idle(); ++step) {
    ASSERT_TRUE(engine.Step().ok());
    ExpectBlocksConsistent(engine);
    ASSERT_LT(step, 10000);
  }
  const EngineStats stats = engine.stats();
  EXPECT_GT(stats.preemptions, 0);
  EXPECT_GT(stats.accepted_tokens, 0);
  EXPECT_EQ(stats.accepted_tokens, stats.proposed_tokens);
  EXPECT_EQ(stats.speculation_source, "draft");
  for (int i = 0; i < n; ++i) {
    const Outcome solo = Solo(requests[i], shape);
    EXPECT_EQ(outs[i].tokens, solo.tokens) << "request " << i;
    EXPECT_EQ(outs[i].logprobs, solo.logprobs) << "request " << i;
  }
  std::printf("draft = target: %lld of %lld guesses kept, %lld preemptions, %lld steps\n",
              static_cast<long long>(stats.accepted_tokens), static_cast<long long>(stats.proposed_tokens),
              static_cast<long long>(stats.preemptions), static_cast<long long>(stats.steps));
}

// Until its steps are priced the engine tries guessing with one request at
// a time: with a draft model, each request's first guess has the draft read
// the request's whole text, which 8 requests trying at once paid for 8
// times over before the engine learnt that guessing did not pay.
TEST(EngineTest, UntilStepsArePricedOneRequestTriesAGuess) {
  CacheCheckingModel::Shape shape;
  shape.blocks = 64;
  CacheCheckingModel model(shape), draft(shape);
  EngineOptions options;
  options.speculative_tokens = 3;
  options.draft_model = &draft;
  ASSERT_TRUE(options.speculation_priced);
  Engine engine(&model, options);
  std::vector<Outcome> outs(8);
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(engine.Submit(Request(Prompt(3, i), &outs[i], 40)).ok());
  // Steps of 8 and of 9 rows, each size twice, price a row: not before the
  // fifth step.
  int64_t proposed = 0;
  for (int step = 0; step < 4; ++step) {
    ASSERT_TRUE(engine.Step().ok());
    EXPECT_LE(engine.stats().proposed_tokens - proposed, 1) << "step " << step;
    proposed = engine.stats().proposed_tokens;
  }
  EXPECT_GT(proposed, 0) << "no guess was tried";
  ASSERT_TRUE(engine.RunUntilIdle().ok());
}

// With a frequency penalty the target's picks and the draft's guesses part
// now and then; each time the draft must start again from the text as it
// is, not from its rejected guesses. A draft left with a rejected guess in
// its cache guesses from a text that is not the request's: almost nothing
// it guesses after that holds. From the text as it is, the draft guesses
// the unpenalized choice, which is often the penalized one too.
TEST(EngineTest, ADraftStartsAgainFromTheTextAfterARejection) {
  CacheCheckingModel::Shape shape;
  shape.blocks = 64;
  CacheCheckingModel model(shape), draft(shape);
  EngineOptions options;
  options.speculative_tokens = 3;
  options.draft_model = &draft;
  options.speculation_priced = false;
  Engine engine(&model, options);
  std::vector<Outcome> outs(4);
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 4; ++i) {
    requests.push_back(Request(Prompt(5, i), &outs[i], 40));
    requests.back().sampling.frequency_penalty = 1.5f;
    ASSERT_TRUE(engine.Submit(requests.back()).ok());
  }
  ASSERT_TRUE(engine.RunUntilIdle().ok());
  const EngineStats stats = engine.stats();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(outs[i].tokens, Solo(requests[i], shape).tokens) << "request " << i;
  EXPECT_LT(stats.accepted_tokens, stats.proposed_tokens) << "no guess was rejected: nothing was tested";
  EXPECT_GT(stats.accepted_tokens * 3, stats.proposed_tokens);  // 48 of 102 here.
  std::printf("draft without the penalty: %lld of %lld guesses kept\n", static_cast<long long>(stats.accepted_tokens),
              static_cast<long long>(stats.proposed_tokens));
}

// Seeded arrivals, lengths, sampling and cancellations on a pool small
// enough to force preemption; after every step no block is leaked or
// double-held, and at the end every request that was not cancelled got
// exactly its solo run's tokens and log-probabilities: with prefix caching
// on and off, and with speculative decoding (its solo run without), on a
// fixed schedule and as priced.
TEST(EngineTest, RandomizedLoadGivesEveryRequestItsSoloTokens) {
  for (const int config : {0, 1, 2, 3}) {
    const bool prefix_caching = config != 1;
    const bool speculation = config >= 2;
    std::mt19937 random(7 + config);
    CacheCheckingModel::Shape shape;
    shape.blocks = 24;  // 96 positions for up to 8 requests of up to 64.
    // With speculation, answers that loop (period 3) so that guesses are kept.
    shape.echo_period = speculation ? 3 : 0;
    CacheCheckingModel model(shape);
    EngineOptions options;
    options.prefix_caching = prefix_caching;
    options.max_num_batched_tokens = 12;
    options.speculative_tokens = speculation ? 4 : 0;
    // 2: every guess found, whatever the steps cost here; 3: as priced by
    // the steps' measured cost (some guesses, or none: the answers hold).
    options.speculation_priced = config == 3;
    Engine engine(&model, options);
    const int n = 40;
    std::vector<Outcome> outs(n);
    std::vector<EngineRequest> requests;
    std::vector<RequestId> ids;
    const std::vector<int> shared = Prompt(9, 99);
    int submitted = 0;
    for (int step = 0; submitted < n || !engine.idle(); ++step) {
      while (submitted < n && random() % 3 == 0) {
        std::vector<int> prompt = Prompt(1 + random() % 30, submitted);
        if (random() % 2 == 0) prompt.insert(prompt.begin(), shared.begin(), shared.end());
        if (prompt.size() > 60) prompt.resize(60);
        const float temperature = random() % 2 == 0 ? 0.0f : 0.7f;
        requests.push_back(Request(prompt, &outs[submitted], 1 + random() % 40, temperature, random()));
        requests.back().prompt_logprobs = random() % 5 == 0;
        // Choices that depend on the tokens before them: a guess's row must
        // see the guesses before it as chosen.
        if (random() % 3 == 0) requests.back().sampling.frequency_penalty = 0.5f;
        if (random() % 4 == 0) requests.back().min_new_tokens = std::min<int64_t>(6, *requests.back().max_new_tokens);
        absl::StatusOr<RequestId> id = engine.Submit(requests.back());
        ASSERT_TRUE(id.ok()) << id.status();
        ids.push_back(*id);
        ++submitted;
      }
      if (submitted > 0 && random() % 15 == 0) engine.Cancel(ids[random() % submitted]);
      ASSERT_TRUE(engine.Step().ok());
      ExpectBlocksConsistent(engine);
      ASSERT_LT(step, 10000);
    }
    EXPECT_EQ(engine.block_pool().in_use(), 0);
    const EngineStats stats = engine.stats();
    EXPECT_GT(stats.preemptions, 0);
    EXPECT_EQ(stats.prefix_hit_tokens > 0, prefix_caching);
    if (!speculation) {
      EXPECT_EQ(stats.proposed_tokens, 0);
    }
    if (config == 2) {
      EXPECT_GT(stats.accepted_tokens, 0);
      EXPECT_GT(stats.proposed_tokens, stats.accepted_tokens);
    }
    int compared = 0;
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(outs[i].finishes, 1) << i;
      EXPECT_LE(outs[i].scheduled, 1) << "scheduled again after a preemption: " << i;
      if (outs[i].finish == FinishReason::kCancelled) continue;
      EXPECT_EQ(outs[i].scheduled, 1) << i;
      const Outcome solo = Solo(requests[i], shape);
      EXPECT_EQ(outs[i].tokens, solo.tokens) << "request " << i;
      EXPECT_EQ(outs[i].logprobs, solo.logprobs) << "request " << i;
      EXPECT_EQ(outs[i].prompt_logprobs, solo.prompt_logprobs) << "request " << i;
      EXPECT_EQ(outs[i].finish, solo.finish) << "request " << i;
      ++compared;
    }
    EXPECT_GT(compared, n / 2);
    std::printf("prefix caching %s, speculation %s: %d requests compared, %lld preemptions, %lld prefix-hit "
                "tokens, %lld steps, %lld of %lld guesses kept\n",
                prefix_caching ? "on" : "off", !speculation ? "off" : config == 2 ? "fixed" : "priced", compared,
                static_cast<long long>(stats.preemptions), static_cast<long long>(stats.prefix_hit_tokens),
                static_cast<long long>(stats.steps), static_cast<long long>(stats.accepted_tokens),
                static_cast<long long>(stats.proposed_tokens));
  }
}

}  // namespace
}  // namespace llama
