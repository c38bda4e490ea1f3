#include "tools/serve_load.h"

#include <gtest/gtest.h>

namespace llama {
namespace {

TEST(ServeLoadTest, QuantileRoundsToTheNearestRank) {
  std::vector<double> values = {5, 1, 4, 2, 3};
  EXPECT_EQ(Quantile(values, 0.0), 1);
  EXPECT_EQ(Quantile(values, 0.5), 3);
  EXPECT_EQ(Quantile(values, 0.99), 5);
  std::vector<double> none;
  EXPECT_EQ(Quantile(none, 0.5), 0);
}

TEST(ServeLoadTest, SummaryGivesMeanAndQuantiles) {
  std::vector<double> values = {1, 2, 3, 4};
  EXPECT_EQ(Summary(values, 1, "ms"), "mean 2.5, p50 3.0, p99 4.0 ms");
  std::vector<double> none;
  EXPECT_EQ(Summary(none, 0, "s"), "mean 0, p50 0, p99 0 s");
}

TEST(ServeLoadTest, ArrivalsAllAtOnceWithoutARate) {
  LoadShape load;
  load.requests = 4;
  std::mt19937_64 random(1);
  EXPECT_EQ(Arrivals(load, random), std::vector<double>(4, 0.0));
}

TEST(ServeLoadTest, PoissonArrivalsRiseFromTheFirstGap) {
  LoadShape load;
  load.requests = 64;
  load.request_rate = 10;
  std::mt19937_64 random(1);
  const std::vector<double> arrival = Arrivals(load, random);
  ASSERT_EQ(arrival.size(), 64u);
  EXPECT_GT(arrival[0], 0);
  for (size_t i = 1; i < arrival.size(); ++i) EXPECT_GE(arrival[i], arrival[i - 1]);
  // 64 gaps of mean 0.1 s: far from 0 and from 64 s.
  EXPECT_GT(arrival.back(), 2);
  EXPECT_LT(arrival.back(), 20);
}

TEST(ServeLoadTest, PromptLengthsSpanHalfToThreeHalves) {
  LoadShape load;
  load.prompt_tokens = 10;
  std::mt19937_64 random(1);
  int shortest = 1 << 30, longest = 0;
  for (int i = 0; i < 1000; ++i) {
    const int n = PromptLength(load, random);
    shortest = std::min(shortest, n);
    longest = std::max(longest, n);
  }
  EXPECT_EQ(shortest, 5);
  EXPECT_EQ(longest, 15);
  load.prompt_tokens = 1;
  EXPECT_GE(PromptLength(load, random), 1);
}

}  // namespace
}  // namespace llama
