#include "worker/sampling/sampling_params.h"

#include <cmath>

#include <gtest/gtest.h>

namespace llama {
namespace {

TEST(SamplingParamsTest, DefaultsAreTheReferencesAndValid) {
  const SamplingParams p;
  EXPECT_EQ(p.token.temperature, 0.6f);
  EXPECT_EQ(p.token.top_p, 0.9f);
  EXPECT_EQ(p.token.top_k, 0);
  EXPECT_EQ(p.token.min_p, 0.0f);
  EXPECT_EQ(p.token.typical_p, 1.0f);
  EXPECT_EQ(p.seed, 1u);
  EXPECT_TRUE(p.Validate(32).ok());
  EXPECT_TRUE(SamplingParams::Greedy().Validate(32).ok());
  EXPECT_EQ(SamplingParams::Greedy().token.temperature, 0.0f);
}

// Each field's error names it and its range; the ends of a closed range pass.
TEST(SamplingParamsTest, ValidateNamesTheFieldAndTheRange) {
  const auto error = [](void (*edit)(SamplingParams&)) {
    SamplingParams p;
    edit(p);
    return std::string(p.Validate(32).message());
  };
  EXPECT_EQ(error([](SamplingParams& p) { p.token.temperature = 2.5f; }), "temperature: 2.5 is out of range [0, 2]");
  EXPECT_EQ(error([](SamplingParams& p) { p.token.temperature = NAN; }), "temperature: nan is out of range [0, 2]");
  EXPECT_EQ(error([](SamplingParams& p) { p.token.top_p = 0; }), "top_p: 0 is out of range (0, 1]");
  EXPECT_EQ(error([](SamplingParams& p) { p.token.top_k = -1; }), "top_k: -1 is out of range [0, 2147483647]");
  EXPECT_EQ(error([](SamplingParams& p) { p.token.min_p = -0.5f; }), "min_p: -0.5 is out of range [0, 1]");
  EXPECT_EQ(error([](SamplingParams& p) { p.token.typical_p = 0; }), "typical_p: 0 is out of range (0, 1]");
  EXPECT_EQ(error([](SamplingParams& p) { p.presence_penalty = 3; }), "presence_penalty: 3 is out of range [-2, 2]");
  EXPECT_EQ(error([](SamplingParams& p) { p.frequency_penalty = -3; }),
            "frequency_penalty: -3 is out of range [-2, 2]");
  EXPECT_EQ(error([](SamplingParams& p) { p.logit_bias = {{32, 1.0f}}; }),
            "logit_bias: token id 32 outside the vocabulary [0, 32)");
  EXPECT_EQ(error([](SamplingParams& p) { p.logit_bias = {{3, 101.0f}}; }),
            "logit_bias: 101 for token 3 is out of range [-100, 100]");
  EXPECT_EQ(error([](SamplingParams& p) {
              p.token = {2.0f, 1.0f, 0, 1.0f};
              p.presence_penalty = -2;
              p.logit_bias = {{31, -100.0f}};
            }),
            "");
}

}  // namespace
}  // namespace llama
