// The generator's semantics on a scripted model whose next token is always
// (last token + 1) mod 8, with logit 5 for it and 0 for the rest: EOS (2)
// arrives after a known number of steps for each row, and the model counts
// the work it is given.

#include "worker/batch/generator.h"

#include <cmath>
#include <limits>
#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_format.h"

namespace llama {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class ScriptedModel final : public LanguageModel {
 public:
  const ModelLimits& limits() const override { return shape; }

  absl::StatusOr<absl::Span<const float>> Forward(absl::Span<const SequenceChunk> chunks) override {
    ++calls;
    logits_.clear();
    for (const SequenceChunk& c : chunks) {
      // Positions must continue where the sequence's cache left off.
      int64_t& next = next_position_[c.blocks[0]];
      if (c.start_pos != 0 && c.start_pos != next) {
        return absl::InternalError(absl::StrCat("sequence at block ", c.blocks[0], " skipped to ", c.start_pos));
      }
      next = c.start_pos + c.tokens.size();
      tokens += c.tokens.size();
      for (size_t i = c.all_logits ? 0 : c.tokens.size() - 1; i < c.tokens.size(); ++i) {
        for (int v = 0; v < 8; ++v) logits_.push_back(v == (c.tokens[i] + 1) % 8 ? 5.0f : 0.0f);
      }
    }
    return absl::Span<const float>(logits_);
  }

  ModelLimits shape{/*vocab_size=*/8, /*max_batch_size=*/2, /*max_seq_len=*/16, /*max_step_tokens=*/8,
                    /*kv_block_size=*/4, /*kv_blocks=*/8};
  int calls = 0;
  int64_t tokens = 0;

 private:
  std::vector<float> logits_;
  std::map<int, int64_t> next_position_;
};

SamplingOptions Greedy(int64_t max_gen_len) {
  SamplingOptions o;
  o.sampling.token.temperature = 0;
  o.max_gen_len = max_gen_len;
  return o;
}

const float kLikely = 5.0f - std::log(std::exp(5.0f) + 7.0f);  // log p of the scripted next token.
const float kUnlikely = 0.0f - std::log(std::exp(5.0f) + 7.0f);

TEST(GeneratorTest, EachRowStopsAtItsOwnEosAndCostsNothingAfter) {
  ScriptedModel model;
  Generator generator(&model, nullptr, /*stop_ids=*/{2});
  absl::StatusOr<std::vector<Generation>> out = generator.Generate({{1, 5}, {1, 0}}, Greedy(10));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT((*out)[0].tokens, ElementsAre(6, 7, 0, 1));  // Then 2 (EOS), cut.
  EXPECT_THAT((*out)[1].tokens, ElementsAre(1));
  // Prefill 2 + 2 tokens, then row 0 feeds 6, 7, 0, 1 and row 1 feeds 1.
  EXPECT_EQ(model.tokens, 9);
  EXPECT_EQ(model.calls, 5);
}

TEST(GeneratorTest, LengthLimits) {
  ScriptedModel model;
  Generator generator(&model, nullptr, {2});
  // max_gen_len caps each row; EOS never comes from 3 -> 4 -> 5 -> 6.
  EXPECT_THAT((*generator.Generate({{3}}, Greedy(3)))[0].tokens, ElementsAre(4, 5, 6));
  // max_seq_len caps too: 14 prompt tokens leave 2 positions.
  const std::vector<int> long_prompt = {3, 4, 5, 6, 7, 0, 1, 3, 4, 5, 6, 7, 0, 3};
  EXPECT_THAT((*generator.Generate({long_prompt}, Greedy(10)))[0].tokens, ElementsAre(4, 5));
  // A prompt of exactly max_seq_len tokens gets none, and no model call.
  model.calls = 0;
  EXPECT_THAT((*generator.Generate({std::vector<int>(16, 3)}, Greedy(10)))[0].tokens, IsEmpty());
  EXPECT_EQ(model.calls, 0);
  // max_gen_len 0 returns no tokens.
  EXPECT_THAT((*generator.Generate({{1, 3}}, Greedy(0)))[0].tokens, IsEmpty());
  // The default max_gen_len is max_seq_len - 1: room to reach EOS here.
  SamplingOptions unlimited;
  unlimited.sampling.token.temperature = 0;
  EXPECT_THAT((*generator.Generate({{3}}, unlimited))[0].tokens, ElementsAre(4, 5, 6, 7, 0, 1));  // Then EOS.
}

TEST(GeneratorTest, LogprobsAndEcho) {
  ScriptedModel model;
  Generator generator(&model, nullptr, {2});
  SamplingOptions o = Greedy(2);
  o.logprobs = true;
  absl::StatusOr<std::vector<Generation>> out = generator.Generate({{4, 5, 7}}, o);
  ASSERT_TRUE(out.ok());
  EXPECT_THAT((*out)[0].tokens, ElementsAre(0, 1));
  ASSERT_EQ((*out)[0].logprobs.size(), 2u);
  EXPECT_NEAR((*out)[0].logprobs[0], kLikely, 1e-6);
  o.echo = true;
  out = generator.Generate({{4, 5, 7}}, o);
  EXPECT_THAT((*out)[0].tokens, ElementsAre(4, 5, 7, 0, 1));
  // Position 0 has no logprob (0, as the reference); 5 follows 4 (likely);
  // 7 does not follow 5 (unlikely); then the generated tokens.
  ASSERT_EQ((*out)[0].logprobs.size(), 5u);
  EXPECT_EQ((*out)[0].logprobs[0], 0.0f);
  EXPECT_NEAR((*out)[0].logprobs[1], kLikely, 1e-6);
  EXPECT_NEAR((*out)[0].logprobs[2], kUnlikely, 1e-6);
  EXPECT_NEAR((*out)[0].logprobs[3], kLikely, 1e-6);
  // max_gen_len 0 with equal-length prompts: the reference shifts these by
  // one position; we score each token from the logits before it.
  o.max_gen_len = 0;
  out = generator.Generate({{4, 5, 7}, {4, 6, 7}}, o);
  ASSERT_TRUE(out.ok());
  EXPECT_NEAR((*out)[1].logprobs[1], kUnlikely, 1e-6);
  EXPECT_NEAR((*out)[1].logprobs[2], kLikely, 1e-6);
  // Echo also cuts at an EOS inside the prompt, as the reference does.
  out = generator.Generate({{4, 2, 5}}, o);
  EXPECT_THAT((*out)[0].tokens, ElementsAre(4));
}

TEST(GeneratorTest, LargeBatchesRunInChunksInInputOrder) {
  ScriptedModel model;
  Generator generator(&model, nullptr, {2});
  absl::StatusOr<std::vector<Generation>> out = generator.Generate({{3}, {4}, {5}, {6}, {7}}, Greedy(1));
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_THAT((*out)[i].tokens, ElementsAre((i + 4) % 8)) << i;
}

// Each batch is handed to the caller as soon as it is done, in order, with
// the results the whole run returns; an error from the caller stops the job
// after the batches it already has.
TEST(GeneratorTest, EachBatchIsHandedOverWhenDone) {
  ScriptedModel model;
  Generator generator(&model, nullptr);
  const std::vector<std::vector<int>> prompts = {{1, 6}, {1, 4}, {1, 5}, {1, 3}, {1, 7}};
  std::vector<std::pair<size_t, std::vector<Generation>>> seen;
  int calls_at_first_batch = 0;
  const auto keep = [&](size_t first, absl::Span<const Generation> batch) {
    if (seen.empty()) calls_at_first_batch = model.calls;
    seen.push_back({first, std::vector<Generation>(batch.begin(), batch.end())});
    return absl::OkStatus();
  };
  absl::StatusOr<std::vector<Generation>> all = generator.Generate(prompts, Greedy(4), keep);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(seen.size(), 3u);  // Batches of max_batch_size 2: [0, 2), [2, 4), [4, 5).
  EXPECT_EQ(seen[0].first, 0u);
  EXPECT_EQ(seen[1].first, 2u);
  EXPECT_EQ(seen[2].first, 4u);
  EXPECT_EQ(seen[2].second.size(), 1u);
  EXPECT_LT(calls_at_first_batch, model.calls);  // Handed over before the rest ran.
  for (const auto& [first, batch] : seen) {
    for (size_t i = 0; i < batch.size(); ++i) EXPECT_EQ(batch[i].tokens, (*all)[first + i].tokens) << first + i;
  }

  ScriptedModel again;
  Generator stopping(&again, nullptr);
  size_t handed = 0;
  absl::StatusOr<std::vector<Generation>> stopped =
      stopping.Generate(prompts, Greedy(4), [&](size_t, absl::Span<const Generation> batch) {
        handed += batch.size();
        return absl::ResourceExhaustedError("disk full");
      });
  EXPECT_EQ(stopped.status().message(), "disk full");
  EXPECT_EQ(handed, 2u);
}

TEST(GeneratorTest, LongPromptsArePrefilledInPieces) {
  ScriptedModel model;  // max_step_tokens 8.
  Generator generator(&model, nullptr, {2});
  SamplingOptions o = Greedy(1);
  o.logprobs = true;
  o.echo = true;
  const std::vector<int> prompt = {3, 4, 5, 6, 7, 0, 1, 3, 4, 5, 6, 7};
  absl::StatusOr<std::vector<Generation>> out = generator.Generate({prompt}, o);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT((*out)[0].tokens.back(), 0);
  // Token 3 at position 7 follows 1 (unlikely); every other prompt token is likely.
  for (int p = 1; p < 12; ++p) EXPECT_NEAR((*out)[0].logprobs[p], p == 7 ? kUnlikely : kLikely, 1e-6) << p;
}

TEST(GeneratorTest, SamplingIsSeededPerRow) {
  ScriptedModel model;
  Generator generator(&model, nullptr, {2});
  SamplingOptions o;
  o.sampling.token.temperature = 2.0f;  // Flat enough to sample widely.
  o.sampling.token.top_p = 1.0f;
  o.max_gen_len = 6;
  o.sampling.seed = 99;
  const std::vector<std::vector<int>> prompts = {{3}, {4}, {5}};
  absl::StatusOr<std::vector<Generation>> a = generator.Generate(prompts, o);
  absl::StatusOr<std::vector<Generation>> b = generator.Generate(prompts, o);
  ASSERT_TRUE(a.ok() && b.ok());
  for (int i = 0; i < 3; ++i) EXPECT_EQ((*a)[i].tokens, (*b)[i].tokens);
  o.sampling.seed = 100;
  absl::StatusOr<std::vector<Generation>> c = generator.Generate(prompts, o);
  bool differs = false;
  for (int i = 0; i < 3; ++i) differs |= (*a)[i].tokens != (*c)[i].tokens;
  EXPECT_TRUE(differs);
}

// The batch job's form: a bad prompt gets its error, named by its index in
// the job, and the others run with the tokens (and, sampled, the streams)
// they have in a job that runs them all.
TEST(GeneratorTest, EachAloneABadPromptCostsOnlyItsOwnResult) {
  ScriptedModel model;
  Generator generator(&model, nullptr, {2});
  SamplingOptions o;
  o.sampling.token.temperature = 2.0f;
  o.sampling.token.top_p = 1.0f;
  o.max_gen_len = 6;
  const std::vector<std::vector<int>> all = {{3}, std::vector<int>(17, 3), {5}, {}, {1, 4}};
  BatchSelection selection;
  selection.each_alone = true;
  std::vector<size_t> reported;
  absl::StatusOr<std::vector<Generation>> out =
      generator.Generate(all, o, [&](size_t first, absl::Span<const Generation> batch) {
        for (size_t i = 0; i < batch.size(); ++i) reported.push_back(first + i);
        return absl::OkStatus();
      }, selection);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(reported, ElementsAre(0, 1, 2, 3, 4));
  EXPECT_THAT((*out)[1].status.message(), HasSubstr("prompt 1 has 17 tokens, more than max_seq_len 16"));
  EXPECT_THAT((*out)[3].status.message(), HasSubstr("prompt 3 is empty"));
  EXPECT_THAT((*out)[1].tokens, IsEmpty());
  for (int i : {0, 2, 4}) EXPECT_TRUE((*out)[i].status.ok()) << i;
  // Strict, the same job fails at its first bad prompt.
  EXPECT_THAT(generator.Generate(all, o).status().message(), HasSubstr("prompt 1 has 17 tokens"));
  // Prompts 2 and 4 alone, as the job's prompts 2 and 4 (a resumed job):
  // the same tokens as in the whole job.
  const absl::StatusOr<std::vector<Generation>> whole = generator.Generate({{3}, {3}, {5}, {3}, {1, 4}}, o);
  BatchSelection rest;
  rest.indices = {2, 4};
  const absl::StatusOr<std::vector<Generation>> resumed = generator.Generate({{5}, {1, 4}}, o, nullptr, rest);
  ASSERT_TRUE(whole.ok() && resumed.ok());
  EXPECT_EQ((*resumed)[0].tokens, (*whole)[2].tokens);
  EXPECT_EQ((*resumed)[1].tokens, (*whole)[4].tokens);
  EXPECT_EQ((*out)[2].tokens, (*whole)[2].tokens);
}

// A row's random stream is read once per sampled token, so the tokens do not
// depend on how prompts are cut into steps or mixed with other rows' decoding.
TEST(GeneratorTest, SampledTokensDoNotDependOnTheStepSize) {
  SamplingOptions o;
  o.sampling.token.temperature = 2.0f;
  o.sampling.token.top_p = 0.95f;
  o.max_gen_len = 5;
  o.logprobs = true;
  const std::vector<std::vector<int>> prompts = {{3, 4, 5, 6, 7, 0, 1}, {4}, {5, 6, 7, 0, 1, 3, 4, 5, 6, 7}};
  std::vector<std::vector<Generation>> results;
  for (int64_t step_tokens : {1, 3, 8, 64}) {
    ScriptedModel model;
    model.shape.max_step_tokens = step_tokens;
    Generator generator(&model, nullptr, {2});
    absl::StatusOr<std::vector<Generation>> out = generator.Generate(prompts, o);
    ASSERT_TRUE(out.ok()) << out.status();
    results.push_back(*std::move(out));
  }
  for (size_t r = 1; r < results.size(); ++r) {
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(results[r][i].tokens, results[0][i].tokens) << "run " << r << " row " << i;
      EXPECT_EQ(results[r][i].logprobs, results[0][i].logprobs) << "run " << r << " row " << i;
    }
  }
}

TEST(GeneratorTest, ForwardAndChooseChecksItsArguments) {
  ScriptedModel model;
  const std::vector<int> tokens = {3};
  const std::vector<int32_t> table = {0};
  std::vector<SequenceChunk> chunks = {{table, 0, tokens, false}};
  std::vector<TokenChoice> choices(1);
  std::vector<ChosenToken> chosen(2);
  EXPECT_THAT(model.ForwardAndChoose(chunks, choices, absl::MakeSpan(chosen)).message(),
              HasSubstr("1 chunks with 1 rows to choose at but 1 token choices and room for 2 tokens"));
  chosen.resize(1);
  chunks[0].proposed = 1;  // As many proposed tokens as the chunk has.
  EXPECT_THAT(model.ForwardAndChoose(chunks, choices, absl::MakeSpan(chosen)).message(),
              HasSubstr("chunk 0: 1 proposed tokens in a chunk of 1; expected 0 to 0"));
  chunks[0].proposed = 0;
  chunks[0].all_logits = true;
  EXPECT_THAT(model.ForwardAndChoose(chunks, choices, absl::MakeSpan(chosen)).message(),
              HasSubstr("asks for all logits"));
  chunks[0].all_logits = false;
  choices[0].sampling.top_k = -1;
  EXPECT_THAT(model.ForwardAndChoose(chunks, choices, absl::MakeSpan(chosen)).message(),
              HasSubstr("choice 0: top_k: -1 is out of range [0, "));
  choices[0].sampling.top_k = 0;
  const int64_t vocab = model.limits().vocab_size;
  for (const LogitAdjustment bad : {LogitAdjustment{static_cast<int>(vocab), 1.0f}, LogitAdjustment{-1, 1.0f},
                                    LogitAdjustment{2, std::numeric_limits<float>::infinity()}}) {
    choices[0].adjustments = absl::MakeConstSpan(&bad, 1);
    EXPECT_THAT(model.ForwardAndChoose(chunks, choices, absl::MakeSpan(chosen)).message(),
                HasSubstr(absl::StrFormat("of token %d; expected a finite value for a token in [0, %d)", bad.token,
                                          vocab)));
  }
  choices[0].adjustments = {};
  ASSERT_TRUE(model.ForwardAndChoose(chunks, choices, absl::MakeSpan(chosen)).ok());
  EXPECT_EQ(chosen[0].token, 4);
  EXPECT_NEAR(chosen[0].logprob, kLikely, 1e-6);
}

TEST(GeneratorTest, BadInputIsAClearError) {
  ScriptedModel model;
  Generator generator(&model, nullptr, {2});
  struct Case {
    std::vector<std::vector<int>> prompts;
    SamplingOptions options;
    const char* expected;
  };
  auto with = [](auto edit) {
    SamplingOptions o = Greedy(4);
    edit(o);
    return o;
  };
  const Case cases[] = {
      {{}, Greedy(4), "no prompts"},
      {{{1}, {}}, Greedy(4), "prompt 1 is empty"},
      {{std::vector<int>(17, 3)}, Greedy(4), "prompt 0 has 17 tokens, more than max_seq_len 16"},
      {{{1, 9}}, Greedy(4), "prompt 0: token id 9 outside the vocabulary [0, 8)"},
      {{{1}}, with([](SamplingOptions& o) { o.sampling.token.temperature = -0.5f; }), "temperature: -0.5 is out of range [0, 2]"},
      {{{1}}, with([](SamplingOptions& o) { o.sampling.token.temperature = 2.5f; }), "temperature: 2.5 is out of range"},
      {{{1}}, with([](SamplingOptions& o) { o.sampling.token.temperature = NAN; }), "temperature: nan is out of range"},
      {{{1}}, with([](SamplingOptions& o) { o.sampling.token.top_p = 0; }), "top_p: 0 is out of range (0, 1]"},
      {{{1}}, with([](SamplingOptions& o) { o.sampling.token.top_p = 1.5f; }), "top_p: 1.5 is out of range"},
      {{{1}}, with([](SamplingOptions& o) { o.max_gen_len = -1; }), "max_gen_len -1: expected >= 0"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::vector<Generation>> out = generator.Generate(c.prompts, c.options);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << c.expected;
    EXPECT_THAT(out.status().message(), HasSubstr(c.expected));
  }
}

}  // namespace
}  // namespace llama
