#include "worker/sampling/sampler.h"

#include <cmath>
#include <map>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

namespace llama {
namespace {

TokenSampling S(float temperature, float top_p, int top_k = 0, float min_p = 0.0f) {
  TokenSampling s;
  s.temperature = temperature;
  s.top_p = top_p;
  s.top_k = top_k;
  s.min_p = min_p;
  return s;
}

TEST(SamplingTest, ArgmaxTakesTheFirstMaximum) {
  const std::vector<float> logits = {1, 5, 2, 5};
  EXPECT_EQ(Argmax(logits.data(), 4), 1);
}

TEST(SamplingTest, LogProbIsLogSoftmax) {
  const std::vector<float> logits = {1, 2, 3};
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_NEAR(LogProb(logits.data(), 3, 0), 1 - std::log(z), 1e-6);
  const std::vector<float> huge = {1000, 0};  // No overflow.
  EXPECT_NEAR(LogProb(huge.data(), 2, 0), 0.0, 1e-6);
}

// The reference's rule on a hand-made distribution: probabilities 0.5, 0.3,
// 0.15, 0.05 with top_p 0.7 keep the first two (0.5 <= 0.7 before the
// second; 0.8 > 0.7 before the third), renormalised to 0.625 / 0.375.
// The k most likely tokens, most likely first, ties by lower id, with their
// log-softmax values, against a full sort.
TEST(SamplingTest, TopLogProbsAreTheLargestInOrder) {
  const std::vector<float> logits = {0.5f, 3.0f, -1.0f, 3.0f, 2.0f, 0.0f, 2.5f};
  for (int k = 1; k <= 5; ++k) {
    int ids[5];
    float logprobs[5];
    TopLogProbs(logits.data(), logits.size(), k, ids, logprobs);
    std::vector<int> order(logits.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
    for (int j = 0; j < k; ++j) {
      EXPECT_EQ(ids[j], order[j]) << "k " << k << " rank " << j;
      EXPECT_NEAR(logprobs[j], LogProb(logits.data(), logits.size(), order[j]), 1e-6);
    }
  }
}

// p = {0.05, 0.5, 0.15, 0.3}: by probability 1 (0.5), 3 (0.3), 2 (0.15), 0 (0.05).
TEST(SamplingTest, TopKAndMinPKeepAPrefixAndTopPSeesItRenormalised) {
  const std::vector<double> p = {0.05, 0.5, 0.15, 0.3};
  std::vector<float> logits;
  for (double x : p) logits.push_back(static_cast<float>(std::log(x)));
  TopPSampler sampler;
  using Pairs = std::vector<std::pair<int, double>>;
  const auto expect = [&](const Pairs& got, const Pairs& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i].first, want[i].first) << i;
      EXPECT_NEAR(got[i].second, want[i].second, 1e-6) << i;
    }
  };
  // top_k 3: {1, 3, 2} renormalised over 0.95.
  expect(sampler.Distribution(logits.data(), 4, S(1.0f, 1.0f, 3)), {{1, 0.5 / 0.95}, {3, 0.3 / 0.95}, {2, 0.15 / 0.95}});
  // top_k 2 keeps {1, 3} (mass 0.8); top_p 0.6 of that is 0.48, passed after
  // token 1 alone. Over the whole distribution top_p 0.6 keeps 3 as well.
  expect(sampler.Distribution(logits.data(), 4, S(1.0f, 0.6f, 2)), {{1, 1.0}});
  expect(sampler.Distribution(logits.data(), 4, S(1.0f, 0.6f)), {{1, 0.625}, {3, 0.375}});
  // min_p 0.25: 0.125 (0.25 x 0.5) and up stay: {1, 3, 2}; min_p 0.61: 0.305 and up: {1}.
  expect(sampler.Distribution(logits.data(), 4, S(1.0f, 1.0f, 0, 0.25f)), {{1, 0.5 / 0.95}, {3, 0.3 / 0.95}, {2, 0.15 / 0.95}});
  expect(sampler.Distribution(logits.data(), 4, S(1.0f, 1.0f, 0, 0.61f)), {{1, 1.0}});
  // Both: the smaller prefix wins; a draw never leaves it.
  expect(sampler.Distribution(logits.data(), 4, S(1.0f, 1.0f, 2, 0.25f)), {{1, 0.625}, {3, 0.375}});
  for (double u : {0.0, 0.3, 0.62, 0.99}) {
    const int token = sampler.Sample(logits.data(), 4, S(1.0f, 1.0f, 2, 0.25f), u);
    EXPECT_TRUE(token == 1 || token == 3) << u;
  }
  // top_k 0 and min_p 0 are the reference's top-p, draw for draw.
  for (double u : {0.0, 0.3, 0.62, 0.99}) {
    EXPECT_EQ(sampler.Sample(logits.data(), 4, S(0.8f, 0.9f, 0, 0.0f), u), sampler.Sample(logits.data(), 4, S(0.8f, 0.9f), u));
  }
}

TEST(SamplingTest, TopPKeepsTheReferencesNucleus) {
  const std::vector<double> p = {0.05, 0.5, 0.15, 0.3};
  std::vector<float> logits;
  for (double x : p) logits.push_back(static_cast<float>(std::log(x)));
  TopPSampler sampler;
  auto d = sampler.Distribution(logits.data(), 4, S(1.0f, 0.7f));
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].first, 1);
  EXPECT_NEAR(d[0].second, 0.625, 1e-6);
  EXPECT_EQ(d[1].first, 3);
  EXPECT_NEAR(d[1].second, 0.375, 1e-6);
  EXPECT_EQ(sampler.Distribution(logits.data(), 4, S(1.0f, 1.0f)).size(), 4u);
  EXPECT_EQ(sampler.Distribution(logits.data(), 4, S(1.0f, 0.4f)).size(), 1u);
}

// The draw walks the kept tokens in id order: on probabilities 0.05, 0.5,
// 0.15, 0.3 the uniform number's intervals are [0, .05) -> 0, [.05, .55)
// -> 1, [.55, .70) -> 2, [.70, 1) -> 3; with top_p 0.7 only 1 and 3 are
// kept, renormalised: [0, .625) -> 1, [.625, 1) -> 3. The GPU sampler's
// parity test holds it to the same map.
TEST(SamplingTest, DrawWalksKeptTokensInIdOrder) {
  const std::vector<double> p = {0.05, 0.5, 0.15, 0.3};
  std::vector<float> logits;
  for (double x : p) logits.push_back(static_cast<float>(std::log(x)));
  TopPSampler sampler;
  const struct {
    float top_p;
    double uniform;
    int token;
  } cases[] = {{1.0f, 0.0, 0},   {1.0f, 0.049, 0}, {1.0f, 0.051, 1}, {1.0f, 0.549, 1},
               {1.0f, 0.551, 2}, {1.0f, 0.699, 2}, {1.0f, 0.701, 3}, {1.0f, 0.999999, 3},
               {0.7f, 0.0, 1},   {0.7f, 0.624, 1}, {0.7f, 0.626, 3}, {0.7f, 0.999999, 3}};
  for (const auto& c : cases) {
    EXPECT_EQ(sampler.Sample(logits.data(), 4, S(1.0f, c.top_p), c.uniform), c.token)
        << "top_p " << c.top_p << ", uniform " << c.uniform;
  }
}

TEST(SamplingTest, SameSeedSameTokens) {
  std::vector<float> logits(1000);
  for (int i = 0; i < 1000; ++i) logits[i] = std::sin(i * 0.37f) * 3;
  const auto draw = [&](uint64_t seed) {
    Rng rng(seed);
    TopPSampler sampler;
    std::vector<int> tokens;
    for (int i = 0; i < 50; ++i) tokens.push_back(sampler.Sample(logits.data(), 1000, S(0.8f, 0.9f), rng.Uniform()));
    return tokens;
  };
  EXPECT_EQ(draw(42), draw(42));
  EXPECT_NE(draw(42), draw(43));
}

// Over many draws the empirical frequencies match the truncated,
// renormalised distribution: a chi-square test at a 1e-6 false-alarm rate.
TEST(SamplingTest, EmpiricalDistributionMatches) {
  std::vector<float> logits(50);
  for (int i = 0; i < 50; ++i) logits[i] = -0.15f * i;
  TopPSampler sampler;
  const float temperature = 0.7f, top_p = 0.8f;
  const auto expected = sampler.Distribution(logits.data(), 50, S(temperature, top_p));
  Rng rng(7);
  std::map<int, int> counts;
  const int draws = 200000;
  for (int i = 0; i < draws; ++i) ++counts[sampler.Sample(logits.data(), 50, S(temperature, top_p), rng.Uniform())];
  double chi2 = 0;
  for (const auto& [token, p] : expected) {
    const double e = p * draws;
    chi2 += (counts[token] - e) * (counts[token] - e) / e;
    counts.erase(token);
  }
  EXPECT_TRUE(counts.empty()) << "sampled a token outside the nucleus";
  // For k - 1 degrees of freedom, mean k - 1 and sd sqrt(2(k - 1)): 7 sd is far beyond 1e-6.
  const double dof = expected.size() - 1;
  EXPECT_LT(chi2, dof + 7 * std::sqrt(2 * dof)) << "chi2 " << chi2 << " with " << dof << " dof";
}

// Locally typical sampling from its definition (Meister et al.; Hugging
// Face's TypicalLogitsWarper), written out plainly: q = softmax(logits / T)
// over the tokens the top_k filter leaves, H = -sum q log q, tokens in order
// of |-log q - H|, kept until their cumulative q reaches typical_p,
// renormalised. Returns (token, probability) by token id.
std::map<int, double> TypicalReference(const std::vector<float>& logits, float temperature, int top_k,
                                       double typical_p) {
  const int n = static_cast<int>(logits.size());
  std::vector<int> ids(n);
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  if (top_k > 0) ids.resize(top_k);
  double z = 0;
  for (int t : ids) z += std::exp(static_cast<double>(logits[t]) / temperature);
  std::map<int, double> q;
  for (int t : ids) q[t] = std::exp(static_cast<double>(logits[t]) / temperature) / z;
  double entropy = 0;
  for (const auto& [t, p] : q) entropy -= p * std::log(p);
  std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) {
    return std::abs(-std::log(q[a]) - entropy) < std::abs(-std::log(q[b]) - entropy);
  });
  std::map<int, double> kept;
  double mass = 0;
  for (int t : ids) {
    kept[t] = q[t];
    mass += q[t];
    if (mass >= typical_p) break;
  }
  for (auto& [t, p] : kept) p /= mass;
  return kept;
}

// p = {0.05, 0.5, 0.15, 0.3}: H = 1.142; surprisals 3.00, 0.69, 1.90, 1.20,
// so by |surprisal - H| the order is 3, 1, 2, 0. typical_p 0.2 keeps token
// 3 alone (not the most likely one), 0.5 tokens 3 and 1, 1 every token.
TEST(SamplingTest, TypicalPKeepsTheTokensNearestTheEntropy) {
  const std::vector<double> p = {0.05, 0.5, 0.15, 0.3};
  std::vector<float> logits;
  for (double x : p) logits.push_back(static_cast<float>(std::log(x)));
  TopPSampler sampler;
  TokenSampling s = S(1.0f, 1.0f);
  s.typical_p = 0.2f;
  auto d = sampler.Distribution(logits.data(), 4, s);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].first, 3);
  s.typical_p = 0.5f;
  d = sampler.Distribution(logits.data(), 4, s);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].first, 1);
  EXPECT_NEAR(d[0].second, 0.625, 1e-6);
  EXPECT_EQ(d[1].first, 3);
  EXPECT_NEAR(d[1].second, 0.375, 1e-6);
  // Every draw lands in the typical set.
  for (double u = 0.0; u < 1.0; u += 0.01) {
    const int token = sampler.Sample(logits.data(), 4, s, u);
    EXPECT_TRUE(token == 1 || token == 3) << u;
  }
  s.typical_p = 1.0f;
  EXPECT_EQ(sampler.Distribution(logits.data(), 4, s).size(), 4u);
}

// Against the definition on wider rows, temperatures, top_k and masses.
TEST(SamplingTest, TypicalPMatchesItsDefinition) {
  std::vector<float> logits(200);
  for (int i = 0; i < 200; ++i) logits[i] = std::sin(i * 0.71f) * 4 + std::cos(i * 0.13f);
  TopPSampler sampler;
  for (const float temperature : {0.5f, 1.0f, 1.7f}) {
    for (const int top_k : {0, 40}) {
      for (const float typical_p : {0.05f, 0.3f, 0.6f, 0.9f, 0.99f}) {
        TokenSampling s = S(temperature, 1.0f, top_k);
        s.typical_p = typical_p;
        const std::map<int, double> want = TypicalReference(logits, temperature, top_k, typical_p);
        const auto got = sampler.Distribution(logits.data(), 200, s);
        std::map<int, double> got_by_id(got.begin(), got.end());
        ASSERT_EQ(got_by_id.size(), want.size()) << "T " << temperature << " top_k " << top_k << " typical_p "
                                                 << typical_p;
        for (const auto& [t, p] : want) {
          ASSERT_TRUE(got_by_id.count(t)) << t;
          EXPECT_NEAR(got_by_id[t], p, 1e-9) << t;
        }
        for (size_t i = 1; i < got.size(); ++i) EXPECT_GE(got[i - 1].second, got[i].second);  // By probability.
      }
    }
  }
}

}  // namespace
}  // namespace llama
