#include "worker/engine/speculation_policy.h"

#include <algorithm>

namespace llama {
namespace {

// Weight of the newest observation in a running mean: steps of one size
// recur many times a second, and the machine's load drifts.
constexpr double kMeanWeight = 0.1;
// Weight kept by the old counts at each update of a GuessRecord.
constexpr double kRecordDecay = 0.8;

}  // namespace

void StepCosts::Observe(int64_t rows, double seconds) {
  if (rows < 1 || rows > kMaxRows || !(seconds >= 0)) return;
  mean_[rows] = seen_[rows] ? mean_[rows] + kMeanWeight * (seconds - mean_[rows]) : seconds;
  seen_[rows] = true;
  Fit();
}

void StepCosts::Fit() {
  // Least squares over the row counts seen, each counted once (a size seen
  // a thousand times does not drown the others).
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (int64_t r = 1; r <= kMaxRows; ++r) {
    if (!seen_[r]) continue;
    const double x = static_cast<double>(r), y = mean_[r];
    n += 1;
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  const double var = n * sxx - sx * sx;
  per_row_ = var > 0 ? std::max(0.0, (n * sxy - sx * sy) / var) : 0.0;
  base_ = n > 0 ? std::max(0.0, (sy - per_row_ * sx) / n) : 0.0;
}

void GuessRecord::Update(int64_t proposed, int64_t accepted) {
  // Guesses are tried in order until one fails: `accepted` held, and one
  // more was tried if it failed.
  held_ = kRecordDecay * held_ + static_cast<double>(accepted);
  tried_ = kRecordDecay * tried_ + static_cast<double>(accepted + (accepted < proposed ? 1 : 0));
}

int64_t GuessRecord::Worth(double bar, int64_t most) {
  int64_t worth = 0;
  for (double p = rate(); worth < most && p > bar; p *= rate()) ++worth;
  if (worth > 0 || most <= 0) {
    idle_steps_ = 0;
    return worth;
  }
  if (++idle_steps_ < kProbeSteps) return 0;
  idle_steps_ = 0;
  return 1;
}

}  // namespace llama
