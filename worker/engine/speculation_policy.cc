#include "worker/engine/speculation_policy.h"

#include <algorithm>
#include <cmath>

namespace llama {
namespace {

// Weight of the newest observation in a running mean: steps of one size
// recur many times a second, and the machine's load drifts.
constexpr double kMeanWeight = 0.1;
// A size's weight in the fit: the steps seen of it after the first, up to
// this many.
constexpr int kFitWeightCap = 10;
// Weight kept by the old counts at each update of a GuessRecord.
constexpr double kRecordDecay = 0.8;

}  // namespace

void StepCosts::Observe(int64_t rows, double seconds) {
  if (rows < 1 || !std::isfinite(seconds) || seconds < 0) return;
  if (rows >= static_cast<int64_t>(mean_.size())) {
    mean_.resize(rows + 1, 0.0);
    seen_.resize(rows + 1, 0);
  }
  double& mean = mean_[rows];
  if (seen_[rows] == 0) {
    mean = seconds;
  } else if (seen_[rows] == 1) {
    mean = std::min(mean, seconds);
  } else {
    mean += kMeanWeight * (seconds - mean);
  }
  seen_[rows] = std::min(seen_[rows] + 1, kFitWeightCap + 1);
  if (seen_[rows] >= 2) Fit();
}

void StepCosts::Fit() {
  // Weighted least squares over the row counts seen.
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  sizes_ = 0;
  for (size_t r = 1; r < mean_.size(); ++r) {
    if (seen_[r] < 2) continue;
    ++sizes_;
    const double w = seen_[r] - 1, x = static_cast<double>(r), y = mean_[r];
    n += w;
    sx += w * x;
    sy += w * y;
    sxx += w * x * x;
    sxy += w * x * y;
  }
  const double var = n * sxx - sx * sx;
  per_row_ = var > 0 ? std::max(0.0, (n * sxy - sx * sy) / var) : 0.0;
  base_ = n > 0 ? std::max(0.0, (sy - per_row_ * sx) / n) : 0.0;
}

void GuessRecord::Update(int64_t proposed, int64_t accepted) {
  // Guesses are tried in order until one fails: `accepted` held, and one
  // more was tried if it failed (or if the request ended before it: a stop
  // or the length limit, counted as a failure).
  held_ = kRecordDecay * held_ + static_cast<double>(accepted);
  tried_ = kRecordDecay * tried_ + static_cast<double>(accepted + (accepted < proposed ? 1 : 0));
}

int64_t GuessRecord::Worth(double bar, double probe_bar, int64_t most) {
  int64_t worth = 0;
  for (double p = rate(); worth < most && p > bar; p *= rate()) ++worth;
  if (worth > 0 || most <= 0) {
    idle_steps_ = 0;
    return worth;
  }
  if (probe_bar >= kProbeBar || ++idle_steps_ < kProbeSteps) return 0;
  idle_steps_ = 0;
  return 1;
}

}  // namespace llama
