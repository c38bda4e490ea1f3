#include "tools/perplexity_eval.h"

#include <cmath>
#include <functional>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace llama {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kVocab = 8;

// Logits that know the text: at position j, `certain` puts nearly all the
// mass on the chunk's token j + 1; elsewhere every token is alike.
class ScriptedModel : public LanguageModel {
 public:
  explicit ScriptedModel(std::function<bool(int64_t position)> certain) : certain_(std::move(certain)) {
    limits_.vocab_size = kVocab;
    limits_.max_batch_size = 1;
    limits_.max_seq_len = 64;
    limits_.max_step_tokens = 64;
    limits_.kv_block_size = 16;
    limits_.kv_blocks = 4;
  }
  const ModelLimits& limits() const override { return limits_; }

  absl::StatusOr<absl::Span<const float>> Forward(absl::Span<const SequenceChunk> chunks) override {
    EXPECT_EQ(chunks.size(), 1u);
    const SequenceChunk& c = chunks[0];
    EXPECT_EQ(c.start_pos, 0);  // Each chunk from an empty cache.
    EXPECT_TRUE(c.all_logits);
    seen_.emplace_back(c.tokens.begin(), c.tokens.end());
    logits_.assign(c.tokens.size() * kVocab, 0.0f);
    for (size_t j = 0; j + 1 < c.tokens.size(); ++j) {
      if (certain_(j)) logits_[j * kVocab + c.tokens[j + 1]] = 40.0f;
    }
    return absl::MakeConstSpan(logits_);
  }

  const std::vector<std::vector<int>>& seen() const { return seen_; }

 private:
  std::function<bool(int64_t)> certain_;
  ModelLimits limits_;
  std::vector<float> logits_;
  std::vector<std::vector<int>> seen_;
};

PerplexityOptions Options(int64_t context, int64_t max_chunks = -1, int bos_id = -1) {
  PerplexityOptions options;
  options.context = context;
  options.max_chunks = max_chunks;
  options.bos_id = bos_id;
  return options;
}

std::vector<int> Text(int n) {
  std::vector<int> tokens(n);
  for (int i = 0; i < n; ++i) tokens[i] = (i * 5 + 3) % kVocab;
  return tokens;
}

TEST(PerplexityTest, AModelThatKnowsNothingHasTheVocabularysPerplexity) {
  ScriptedModel model([](int64_t) { return false; });
  const absl::StatusOr<Perplexity> p = MeasurePerplexity(model, Text(70), Options(16));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->chunks, 4);              // 70 tokens: four whole chunks of 16, the rest dropped.
  EXPECT_EQ(p->scored_tokens, 4 * 7);   // Positions 8 to 14 predict tokens 9 to 15.
  // LogProb is a float: a relative 1e-6 is its rounding.
  EXPECT_NEAR(p->value, kVocab, 1e-6 * kVocab);
  EXPECT_EQ(p->error, 0);  // Every token alike: no spread.
}

TEST(PerplexityTest, OnlyTheSecondHalfOfEachChunkIsScored) {
  // Certain in the first half only: what is scored knows nothing.
  ScriptedModel first_half([](int64_t j) { return j < 8; });
  EXPECT_NEAR(MeasurePerplexity(first_half, Text(32), Options(16))->value, kVocab, 1e-6 * kVocab);
  ScriptedModel second_half([](int64_t j) { return j >= 8; });
  const Perplexity sure = *MeasurePerplexity(second_half, Text(32), Options(16));
  EXPECT_LT(sure.value, 1.0 + 1e-12);
  EXPECT_GE(sure.value, 1.0);
}

TEST(PerplexityTest, TheErrorIsTheMeansStandardErrorCarriedThroughExp) {
  // Certain on every other position: the scored NLLs are 0 and log 8 in turn.
  ScriptedModel alternating([](int64_t j) { return j % 2 == 0; });
  const Perplexity p = *MeasurePerplexity(alternating, Text(16), Options(16));
  std::vector<double> nll;
  for (int64_t j = 8; j < 15; ++j) nll.push_back(j % 2 == 0 ? 0.0 : std::log(static_cast<double>(kVocab)));
  double mean = 0, squares = 0;
  for (double x : nll) mean += x / nll.size();
  for (double x : nll) squares += (x - mean) * (x - mean);
  EXPECT_NEAR(p.value, std::exp(mean), 1e-6);
  EXPECT_NEAR(p.error, std::exp(mean) * std::sqrt(squares / nll.size() / (nll.size() - 1)), 1e-6);
}

TEST(PerplexityTest, EachChunkStartsWithBosAndTheChunksCanBeCapped) {
  ScriptedModel model([](int64_t) { return false; });
  std::vector<double> running;
  const Perplexity p = *MeasurePerplexity(model, Text(64), Options(16, 2, 1),
                                          [&](int64_t chunk, double value) {
                                            EXPECT_EQ(chunk, static_cast<int64_t>(running.size()) + 1);
                                            running.push_back(value);
                                          });
  EXPECT_EQ(p.chunks, 2);
  ASSERT_EQ(model.seen().size(), 2u);
  const std::vector<int> text = Text(64);
  for (int c = 0; c < 2; ++c) {
    EXPECT_EQ(model.seen()[c][0], 1);
    EXPECT_EQ(std::vector<int>(model.seen()[c].begin() + 1, model.seen()[c].end()),
              std::vector<int>(text.begin() + c * 16 + 1, text.begin() + (c + 1) * 16));
  }
  EXPECT_EQ(running.size(), 2u);
}

TEST(PerplexityTest, TooShortATextOrTooLongAContextIsAClearError) {
  ScriptedModel model([](int64_t) { return false; });
  EXPECT_THAT(MeasurePerplexity(model, Text(10), Options(16)).status().message(),
              HasSubstr("the text is 10 tokens, fewer than one chunk of 16"));
  EXPECT_THAT(MeasurePerplexity(model, Text(200), Options(128)).status().message(),
              HasSubstr("a context of 128 tokens: expected 2 to 64"));
}

}  // namespace
}  // namespace llama
