// SampleRows against the CPU sampler (worker/sampling/sampler.h) on the same
// logits and uniform numbers. Skipped without a GPU.

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "worker/sampling/sampler.h"
#include "ops/cuda/elementwise.h"
#include "ops/cuda/parity_fixture.h"
#include "ops/cuda/sampling.h"

namespace llama::cuda {
namespace {

using SamplingParityTest = ParityTest;

// The CPU sampler's probabilities, sorted by descending probability (ties
// by id), for judging how close a draw is to a boundary.
struct Nucleus {
  std::vector<std::pair<int, double>> kept;  // In id order, normalised.
  double margin;                             // Distance of the nucleus' edge from top_p.
};

Nucleus CpuNucleus(const float* logits, int64_t vocab, float temperature, float top_p) {
  std::vector<double> p(vocab);
  const double m = logits[Argmax(logits, vocab)];
  double total = 0;
  for (int64_t i = 0; i < vocab; ++i) total += p[i] = std::exp((logits[i] - m) / temperature);
  std::vector<int> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
  Nucleus nucleus{{}, 1.0};
  double before = 0, kept_mass = 0;
  for (int i : order) {
    // At top_p >= 1 every token is kept, whatever the rounding: no edge (the
    // mass before the last tokens comes within 1e-9 of 1.0 in every row).
    if (top_p < 1.0f) nucleus.margin = std::min(nucleus.margin, std::abs(before / total - top_p));
    if (before / total > top_p) break;
    nucleus.kept.emplace_back(i, p[i]);
    kept_mass += p[i];
    before += p[i];
  }
  std::sort(nucleus.kept.begin(), nucleus.kept.end());
  for (auto& [token, prob] : nucleus.kept) prob /= kept_mass;
  return nucleus;
}

// SampleRows picks what TopPSampler / Argmax pick for the same
// uniform numbers, on 32000-token rows at several temperatures and top_p,
// except where a draw or the nucleus edge lies within kMarginal of a
// boundary: those are counted and must stay rare. The GPU's probabilities
// are float expf of float (l - max) / T: a few ulps, ~6e-7 relative, on the
// tokens that carry the mass, so a normalised cumulative sum (summed in
// double) is off by about that much; kMarginal = 1e-5 is 15x that. With
// 1500 flat-ish kept tokens the chance a draw lands that close to a boundary
// is ~3%; the allowance is 10% of the rows. Log-probabilities within 1e-4 of
// LogProb (float log-sum-exp over 32000 terms).
TEST_F(SamplingParityTest, SampleRowsPicksTheCpuSamplersTokens) {
  const int64_t vocab = 32000;
  const struct { float temperature, top_p; } settings[] = {{0.0f, 0.9f}, {0.6f, 0.9f}, {1.0f, 0.5f}, {1.5f, 1.0f},
                                                            {0.8f, 0.95f}};
  std::vector<float> logits;
  std::vector<RowSampling> params;
  std::mt19937_64 rng(15);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  int row = 0;
  for (const auto& setting : settings) {
    for (int draw = 0; draw < 24; ++draw, ++row) {
      std::vector<float> values = Random(vocab, 100 + row);
      for (float& x : values) x *= 3.0f;  // Peaked enough for small nuclei, flat enough for big ones.
      if (draw == 0) values[17] = values[23] = 40.0f;  // A tie for the argmax: the first wins.
      logits.insert(logits.end(), values.begin(), values.end());
      params.push_back({setting.temperature, setting.top_p, uniform(rng)});
    }
  }
  const int64_t rows = params.size();
  int32_t* tokens = Upload(std::vector<int32_t>(rows));
  float* logprobs = Upload(std::vector<float>(rows));
  float* probs = Upload(std::vector<float>(rows * vocab));
  ASSERT_TRUE(SampleRows(Upload(logits), rows, vocab, Upload(params), probs, tokens, logprobs, nullptr).ok());
  const std::vector<int32_t> gpu_tokens = Download(tokens, rows);
  const std::vector<float> gpu_logprobs = Download(logprobs, rows);
  TopPSampler sampler;
  int marginal = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* l = logits.data() + r * vocab;
    const RowSampling& p = params[r];
    ASSERT_GE(gpu_tokens[r], 0);
    ASSERT_LT(gpu_tokens[r], vocab);
    EXPECT_NEAR(gpu_logprobs[r], LogProb(l, vocab, gpu_tokens[r]), 1e-4) << r;
    if (p.temperature == 0) {
      EXPECT_EQ(gpu_tokens[r], Argmax(l, vocab)) << r;
      continue;
    }
    const Nucleus nucleus = CpuNucleus(l, vocab, p.temperature, p.top_p);
    double cumulative = 0, distance = nucleus.margin;
    for (const auto& [token, prob] : nucleus.kept) {
      cumulative += prob;
      distance = std::min(distance, std::abs(cumulative - p.uniform));
    }
    constexpr double kMarginal = 1e-5;
    if (distance < kMarginal) {
      ++marginal;
      continue;
    }
    EXPECT_EQ(gpu_tokens[r], sampler.Sample(l, vocab, TokenSampling{p.temperature, p.top_p}, p.uniform))
        << "row " << r << " T " << p.temperature << " top_p " << p.top_p << " u " << p.uniform;
  }
  EXPECT_LE(marginal, rows / 10);
}

// Exact cases: the hand-made distribution of worker/sampling/sampler_test.cc and a
// flat one where every token ties (1000 tokens, top_p 0.5005 keeps 501).
TEST_F(SamplingParityTest, SampleRowsOnKnownDistributions) {
  std::vector<float> logits;
  for (double x : {0.05, 0.5, 0.15, 0.3}) logits.push_back(static_cast<float>(std::log(x)));
  const std::vector<std::pair<RowSampling, int>> cases = {
      {{1.0f, 1.0f, 0.049}, 0}, {{1.0f, 1.0f, 0.051}, 1}, {{1.0f, 1.0f, 0.551}, 2}, {{1.0f, 1.0f, 0.701}, 3},
      {{1.0f, 0.7f, 0.0}, 1},   {{1.0f, 0.7f, 0.624}, 1}, {{1.0f, 0.7f, 0.626}, 3}, {{1.0f, 0.7f, 0.999999}, 3}};
  std::vector<float> all_logits;
  std::vector<RowSampling> params;
  for (const auto& [param, token] : cases) {
    all_logits.insert(all_logits.end(), logits.begin(), logits.end());
    params.push_back(param);
  }
  int32_t* tokens = Upload(std::vector<int32_t>(cases.size()));
  float* logprobs = Upload(std::vector<float>(cases.size()));
  ASSERT_TRUE(SampleRows(Upload(all_logits), cases.size(), 4, Upload(params), Upload(std::vector<float>(4 * cases.size())),
                         tokens, logprobs, nullptr)
                  .ok());
  const std::vector<int32_t> got = Download(tokens, cases.size());
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(got[i], cases[i].second) << "case " << i;

  const std::vector<float> flat(1000, 0.0f);
  const std::vector<RowSampling> flat_params = {{1.0f, 0.5005f, 0.1}, {1.0f, 0.5005f, 0.5}, {1.0f, 0.5005f, 0.9}};
  std::vector<float> flat_logits;
  for (int i = 0; i < 3; ++i) flat_logits.insert(flat_logits.end(), flat.begin(), flat.end());
  int32_t* flat_tokens = Upload(std::vector<int32_t>(3));
  ASSERT_TRUE(SampleRows(Upload(flat_logits), 3, 1000, Upload(flat_params), Upload(std::vector<float>(3000)),
                         flat_tokens, Upload(std::vector<float>(3)), nullptr)
                  .ok());
  const std::vector<int32_t> flat_got = Download(flat_tokens, 3);
  TopPSampler sampler;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(flat_got[i], static_cast<int>(flat_params[i].uniform * 501)) << i;
    EXPECT_EQ(sampler.Sample(flat.data(), 1000, TokenSampling{1.0f, 0.5005f}, flat_params[i].uniform), flat_got[i]) << i;
  }
}

// Rows with a NaN or infinite logit at temperature > 0: the sampler's sums
// are NaN and keep no token; it must still return an id inside the row (the
// largest comparable logit), and FlagNonFinite must see the row.
TEST_F(SamplingParityTest, SampleRowsWithNonFiniteLogitsStayInsideTheRow) {
  const int64_t vocab = 1000;
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> logits = Random(4 * vocab, 16);
  logits[0 * vocab + 7] = 50.0f;  // Row 0: finite, for contrast.
  std::fill(logits.begin() + 1 * vocab, logits.begin() + 2 * vocab, nan);  // Row 1: all NaN.
  logits[2 * vocab + 5] = 40.0f;  // Row 2: one NaN among finite values.
  logits[2 * vocab + 9] = nan;
  logits[3 * vocab + 11] = inf;  // Row 3: one +inf.
  const std::vector<RowSampling> params(4, RowSampling{0.8f, 0.9f, 0.5});
  int32_t* tokens = Upload(std::vector<int32_t>(4, -7));
  ASSERT_TRUE(SampleRows(Upload(logits), 4, vocab, Upload(params), Upload(std::vector<float>(4 * vocab)), tokens,
                         Upload(std::vector<float>(4)), nullptr)
                  .ok());
  const std::vector<int32_t> got = Download(tokens, 4);
  for (int r = 0; r < 4; ++r) {
    EXPECT_GE(got[r], 0) << "row " << r;
    EXPECT_LT(got[r], vocab) << "row " << r;
  }
  EXPECT_EQ(got[0], 7);
  EXPECT_EQ(got[2], 5);
  EXPECT_EQ(got[3], 11);

  const float* device_logits = Upload(logits);
  int32_t* flags = Upload(std::vector<int32_t>(4));
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(FlagNonFinite(device_logits + r * vocab, vocab, flags, r, nullptr).ok());
  EXPECT_EQ(Download(flags, 4), (std::vector<int32_t>{0, 1, 1, 1}));
}

}  // namespace
}  // namespace llama::cuda
