#include "worker/engine/speculation_policy.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace llama {
namespace {

TEST(StepCostsTest, FitsBasePlusRowsAndIgnoresWhatItCannotUse) {
  StepCosts costs;
  EXPECT_EQ(costs.Predict(4), 0.0);
  costs.Observe(1, 0.031);
  costs.Observe(1, 0.030);  // A size counts from its second step, the faster of the two.
  EXPECT_EQ(costs.per_row(), 0.0);  // One size: not priced yet.
  EXPECT_NEAR(costs.Predict(1), 0.030, 1e-12);
  costs.Observe(5, 0.058);
  EXPECT_EQ(costs.per_row(), 0.0);
  EXPECT_FALSE(costs.priced());
  costs.Observe(5, 0.058);
  EXPECT_TRUE(costs.priced());
  EXPECT_NEAR(costs.per_row(), 0.007, 1e-9);
  EXPECT_NEAR(costs.Predict(3), 0.044, 1e-9);
  // Later steps move a size's mean a tenth of the way each: 0.058 -> 0.059.
  costs.Observe(5, 0.068);
  EXPECT_NEAR(costs.per_row(), (0.059 - 0.030) / 4, 1e-9);
  costs.Observe(5, 0.049);  // And back: 0.059 -> 0.058.
  EXPECT_NEAR(costs.per_row(), 0.007, 1e-9);
  // Sizes on one line: however often each is seen, the line stays.
  for (int i = 0; i < 100; ++i) costs.Observe(1, 0.030);
  EXPECT_NEAR(costs.per_row(), 0.007, 1e-9);
  costs.Observe(0, 5.0);
  costs.Observe(3, std::nan(""));
  costs.Observe(3, std::numeric_limits<double>::infinity());
  costs.Observe(3, -1.0);
  EXPECT_NEAR(costs.per_row(), 0.007, 1e-9);
  // Large steps are fitted too (a server decoding hundreds of requests).
  for (int i = 0; i < 11; ++i) costs.Observe(201, 0.030 + 0.007 * 200);
  EXPECT_NEAR(costs.per_row(), 0.007, 1e-9);
}

// One slow step of a size seldom met moves the fit less than the sizes
// seen often hold it.
TEST(StepCostsTest, AnOutlierOfARareSizeMovesTheFitLittle) {
  StepCosts costs;
  for (int i = 0; i < 20; ++i) {
    costs.Observe(1, 0.030);
    costs.Observe(2, 0.037);
    costs.Observe(3, 0.044);
  }
  costs.Observe(6, 1.0);  // A stall: 30x the line.
  EXPECT_NEAR(costs.per_row(), 0.007, 1e-9);
  costs.Observe(6, 0.065);  // The size met again, at its usual cost.
  EXPECT_NEAR(costs.per_row(), 0.007, 1e-9);
}

TEST(GuessRecordTest, GuessesAsFarAsTheyAreLikelyToHold) {
  GuessRecord record;
  EXPECT_DOUBLE_EQ(record.rate(), 0.5);
  // Free rows: every guess allowed; rows that cost nothing are never refused.
  EXPECT_EQ(record.Worth(0.0, 0.0, 4), 4);
  // rate^j > bar: 0.5 and 0.25 clear 0.2, 0.125 does not.
  EXPECT_EQ(record.Worth(0.2, 0.2, 4), 2);
  for (int i = 0; i < 20; ++i) record.Update(4, 4);  // Every guess held.
  EXPECT_GT(record.rate(), 0.95);
  EXPECT_EQ(record.Worth(0.2, 0.2, 6), 6);
  for (int i = 0; i < 20; ++i) record.Update(3, 0);  // None held.
  EXPECT_LT(record.rate(), 0.05);
  EXPECT_EQ(record.Worth(0.2, 0.2, 4), 0);
}

// A new request starts from the job's rate. From one in two it would not
// guess where a guess costs over half a token's time (a draft of the
// target's own weights in q4_k, at 0.43 of a bf16 step with the row, is
// such a case), and one failed first guess would shut it out where a
// guess costs a third.
TEST(GuessRecordTest, ANewRequestStartsFromTheJobsRate) {
  GuessRecord job;
  for (int i = 0; i < 20; ++i) job.Update(4, 4);
  GuessRecord request(job.rate());
  EXPECT_DOUBLE_EQ(request.rate(), job.rate());
  EXPECT_EQ(request.Worth(0.6, 0.6, 4), 4);
  EXPECT_EQ(GuessRecord().Worth(0.6, 0.6, 4), 0);  // From one in two.
  GuessRecord unlucky(job.rate()), from_half;
  unlucky.Update(1, 0);
  from_half.Update(1, 0);
  EXPECT_EQ(unlucky.Worth(0.4, 0.4, 4), 1);
  EXPECT_EQ(from_half.Worth(0.4, 0.4, 4), 0);
}

// With a draft model a probe also pays for the draft reading the text it
// has not seen: after a pause in guessing that is many tokens, and a probe
// behind it costs what a token does. A request whose guesses pay guesses
// behind any catch-up: the steps after it make it up.
TEST(GuessRecordTest, AProbeBehindALongCatchUpIsNotTried) {
  GuessRecord low(0.1);
  int probes = 0;
  for (int step = 0; step < 10 * GuessRecord::kProbeSteps; ++step) probes += low.Worth(0.3, 0.6, 4);
  EXPECT_EQ(probes, 0);
  for (int step = 0; step < GuessRecord::kProbeSteps; ++step) probes += low.Worth(0.3, 0.3, 4);
  EXPECT_EQ(probes, 1);
  EXPECT_EQ(GuessRecord(0.9).Worth(0.1, 0.95, 4), 4);
}

TEST(GuessRecordTest, ALowRateIsProbedAgainNowAndThen) {
  GuessRecord record;
  for (int i = 0; i < 30; ++i) record.Update(4, 0);
  int probes = 0;
  for (int step = 0; step < 10 * GuessRecord::kProbeSteps; ++step) probes += record.Worth(0.3, 0.3, 4);
  EXPECT_EQ(probes, 10);  // One guess every kProbeSteps steps: a failing guess costs a row in 16 steps.
  EXPECT_EQ(record.Worth(0.3, 0.3, 0), 0);
  // Where a row costs half a token's time or more, no probe.
  probes = 0;
  for (int step = 0; step < 10 * GuessRecord::kProbeSteps; ++step) probes += record.Worth(0.5, 0.5, 4);
  EXPECT_EQ(probes, 0);
}

}  // namespace
}  // namespace llama
