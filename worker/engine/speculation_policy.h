// How many guesses a decoding request verifies in a step (speculative
// decoding): as many as are expected to pay for their rows.
//
// A guess costs a row of the step whether it holds or not, and what a row
// costs depends on the machine: while a step is bound by reading the
// weights (one request, many cores) rows are nearly free; on two cores a
// row of TinyLlama Q4_K_M costs a quarter of a decode step, and a step of
// eight requests is already bound by arithmetic, where a guess that fails
// costs as much as a token. So the engine measures its own steps (StepCosts
// fits seconds = base + per_row * rows) and each request keeps its record
// of how often its guesses held (GuessRecord). Adding a row whose guess
// holds with probability g raises the step's tokens per second when
// g > per_row * tokens / seconds: guess j of a request holds only if the
// ones before it did, with probability rate^j, so a request guesses while
// rate^j clears that bar. As EAGLE-2 and SpecDec++ size their drafts by
// expected acceptance, with the cost measured instead of assumed.

#ifndef LLAMA_WORKER_ENGINE_SPECULATION_POLICY_H_
#define LLAMA_WORKER_ENGINE_SPECULATION_POLICY_H_

#include <cstdint>
#include <vector>

namespace llama {

// seconds = base + per_row * rows, fitted to the steps observed: each
// step size's recent mean, weighed by how often it was seen (up to a cap:
// the common sizes do not drown the rest). A size enters the fit at its
// second step, from the faster of its first two: a stall is a spike up,
// and one step of a size seldom met must not price every row.
class StepCosts {
 public:
  // A step of `rows` rows, all decodes and guesses, took `seconds`.
  void Observe(int64_t rows, double seconds);
  // 0 until steps of two sizes were seen: guessing is tried before it is
  // priced.
  double per_row() const { return per_row_; }
  // Steps of two sizes were fitted: per_row is measured, not assumed.
  bool priced() const { return sizes_ >= 2; }
  // The predicted seconds of a step of `rows` rows; 0 before any step.
  double Predict(int64_t rows) const { return base_ + per_row_ * static_cast<double>(rows); }

 private:
  void Fit();

  std::vector<double> mean_;  // By row count: recent seconds (an exponential average).
  std::vector<int> seen_;     // By row count: steps observed, up to the cap.
  double base_ = 0, per_row_ = 0;
  int sizes_ = 0;  // Row counts in the fit.
};

// One request's guesses so far: how often a guess held when the ones
// before it had (an exponentially weighted count, so a request whose text
// turns repetitive, or stops being so, is followed within a few steps).
// The engine keeps one for the whole job too, whose rate is a new
// request's prior: how often a draft model agrees with the target is
// mostly a property of the two models, and a request that started from
// one in two would not guess at all where a guess costs over half a
// token's time (a draft step of a quarter of the target's size, say), nor
// after one failed first guess where it costs a third.
class GuessRecord {
 public:
  // A prior of `prior_rate`, weighing as much as kPriorGuesses guesses.
  explicit GuessRecord(double prior_rate = 0.5) : held_(kPriorGuesses * prior_rate), tried_(kPriorGuesses) {}

  // A verification of `proposed` guesses kept the first `accepted`.
  void Update(int64_t proposed, int64_t accepted);
  double rate() const { return held_ / tried_; }

  // Guesses worth verifying this step, at most `most`: the largest j with
  // rate^j > `bar`, a guess's cost * tokens / seconds of the step
  // (StepCosts' per_row, plus a draft model's step). A request that has
  // not guessed for kProbeSteps steps tries one guess, so a low rate is
  // looked at again, where that probe costs less than kProbeBar of a
  // token's time (`probe_bar`): in a step bound by arithmetic, or behind a
  // long catch-up of a draft model (which reads the text it has not seen
  // before it guesses: after a pause in guessing, many tokens), a failed
  // probe costs nearly what a token does. The catch-up is not in `bar`: a
  // request whose guesses pay makes it up in the steps that follow.
  int64_t Worth(double bar, double probe_bar, int64_t most);

  static constexpr int kProbeSteps = 16;
  static constexpr double kProbeBar = 0.5;
  static constexpr double kPriorGuesses = 2;

 private:
  double held_, tried_;
  int idle_steps_ = 0;
};

}  // namespace llama

#endif  // LLAMA_WORKER_ENGINE_SPECULATION_POLICY_H_
