#include "worker/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace llama {

int Argmax(const float* logits, int64_t n) {
  int best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (logits[i] > logits[best]) best = static_cast<int>(i);
  }
  return best;
}

float LogProb(const float* logits, int64_t n, int token) {
  const float max_logit = logits[Argmax(logits, n)];
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i] - max_logit));
  return static_cast<float>(static_cast<double>(logits[token] - max_logit) - std::log(sum));
}

uint64_t StreamSeed(uint64_t seed, uint64_t index) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (index + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void TopLogProbs(const float* logits, int64_t n, int k, int* ids, float* logprobs) {
  const float max_logit = logits[Argmax(logits, n)];
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i] - max_logit));
  const double log_sum = std::log(sum);
  // One pass keeping the k best, in order (k is small: at most 5 here).
  int count = 0;
  for (int64_t i = 0; i < n; ++i) {
    int at = count;
    while (at > 0 && logits[ids[at - 1]] < logits[i]) --at;
    if (at >= k) continue;
    for (int j = std::min(count, k - 1); j > at; --j) ids[j] = ids[j - 1];
    ids[at] = static_cast<int>(i);
    count = std::min(count + 1, k);
  }
  for (int j = 0; j < k; ++j) logprobs[j] = static_cast<float>(static_cast<double>(logits[ids[j]] - max_logit) - log_sum);
}

int64_t TopPSampler::Prepare(const float* logits, int64_t n, const TokenSampling& s) {
  const double temperature = s.temperature, top_p = s.top_p, min_p = s.min_p;
  const int64_t top_k = s.top_k;
  probs_.resize(n);
  order_.resize(n);
  // softmax(logits / T) in double: the tail matters for the cumulative sum.
  const int most_likely = Argmax(logits, n);
  const double max_logit = logits[most_likely];
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    probs_[i] = std::exp((logits[i] - max_logit) / temperature);
    total += probs_[i];
  }
  for (int64_t i = 0; i < n; ++i) probs_[i] /= total;
  std::iota(order_.begin(), order_.end(), 0);
  const auto by_probability = [&](int a, int b) { return probs_[a] > probs_[b] || (probs_[a] == probs_[b] && a < b); };
  // top_k and min_p keep a prefix of the tokens by probability; top_p walks
  // that prefix with its mass as the whole (1 without them: the reference).
  int64_t limit = n, sorted = 0;
  if (top_k > 0) limit = std::min<int64_t>(limit, top_k);
  if (min_p > 0) {
    const double threshold = min_p * probs_[most_likely];
    limit = std::min<int64_t>(limit, std::count_if(probs_.begin(), probs_.end(),
                                                   [threshold](double p) { return p >= threshold; }));
  }
  double limit_mass = 1.0;
  if (limit < n) {
    std::partial_sort(order_.begin(), order_.begin() + limit, order_.end(), by_probability);
    sorted = limit;
    limit_mass = 0.0;
    for (int64_t i = 0; i < limit; ++i) limit_mass += probs_[order_[i]];
  }
  // Only the kept prefix needs ordering: grow a partial sort until the
  // cumulative probability before the next token exceeds top_p.
  int64_t kept = 0;
  double cumulative = 0.0;
  while (kept < limit) {
    if (kept == sorted) {
      const int64_t next = std::min(n, std::max<int64_t>(64, 2 * sorted));
      std::partial_sort(order_.begin() + sorted, order_.begin() + next, order_.end(), by_probability);
      sorted = next;
    }
    // The reference keeps token k while cumsum_k - p_k <= top_p, i.e. while
    // the mass before it does not exceed top_p.
    if (cumulative > top_p * limit_mass) break;
    cumulative += probs_[order_[kept]];
    ++kept;
  }
  if (s.typical_p < 1) kept = KeepTypical(kept, s.typical_p);
  return kept;
}

int64_t TopPSampler::KeepTypical(int64_t kept, double typical_p) {
  // The kept tokens renormalised: their entropy, and each one's distance
  // from it in surprisal (-log q).
  double mass = 0.0;
  for (int64_t i = 0; i < kept; ++i) mass += probs_[order_[i]];
  double entropy = 0.0;
  for (int64_t i = 0; i < kept; ++i) {
    const double q = probs_[order_[i]] / mass;
    if (q > 0) entropy -= q * std::log(q);
  }
  scores_.resize(probs_.size());
  for (int64_t i = 0; i < kept; ++i) {
    const double q = probs_[order_[i]] / mass;
    scores_[order_[i]] = q > 0 ? std::abs(-std::log(q) - entropy) : std::numeric_limits<double>::infinity();
  }
  std::sort(order_.begin(), order_.begin() + kept,
            [&](int a, int b) { return scores_[a] < scores_[b] || (scores_[a] == scores_[b] && a < b); });
  // The shortest prefix whose mass reaches typical_p (Hugging Face: the
  // first index where the cumulative sum is >= typical_p), and the tokens
  // tied with its last.
  int64_t last = kept - 1;
  double cumulative = 0.0;
  for (int64_t i = 0; i < kept; ++i) {
    cumulative += probs_[order_[i]] / mass;
    if (cumulative >= typical_p) {
      last = i;
      break;
    }
  }
  while (last + 1 < kept && scores_[order_[last + 1]] <= scores_[order_[last]]) ++last;
  // Back in descending probability, as Prepare leaves them.
  std::sort(order_.begin(), order_.begin() + last + 1,
            [&](int a, int b) { return probs_[a] > probs_[b] || (probs_[a] == probs_[b] && a < b); });
  return last + 1;
}

int TopPSampler::Sample(const float* logits, int64_t n, const TokenSampling& s, double uniform) {
  const int64_t kept = Prepare(logits, n, s);
  std::sort(order_.begin(), order_.begin() + kept);
  double mass = 0.0;
  for (int64_t i = 0; i < kept; ++i) mass += probs_[order_[i]];
  const double target = uniform * mass;
  double cumulative = 0.0;
  for (int64_t i = 0; i < kept; ++i) {
    cumulative += probs_[order_[i]];
    if (target < cumulative) return order_[i];
  }
  // Rounding left target at the very end: the last kept token with mass.
  for (int64_t i = kept - 1; i > 0; --i) {
    if (probs_[order_[i]] > 0) return order_[i];
  }
  return order_[0];
}

std::vector<std::pair<int, double>> TopPSampler::Distribution(const float* logits, int64_t n,
                                                              const TokenSampling& s) {
  const int64_t kept = Prepare(logits, n, s);
  double mass = 0.0;
  for (int64_t i = 0; i < kept; ++i) mass += probs_[order_[i]];
  std::vector<std::pair<int, double>> distribution;
  for (int64_t i = 0; i < kept; ++i) distribution.emplace_back(order_[i], probs_[order_[i]] / mass);
  return distribution;
}

}  // namespace llama
