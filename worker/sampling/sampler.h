// Choosing the next token from logits, as the reference does: argmax at
// temperature 0, else softmax(logits / T) then top-p (nucleus) sampling:
// sort descending, drop tokens whose preceding cumulative probability
// already exceeds top_p (mask = cumsum - p > top_p), renormalise, draw.
//
// The draw is a function of one uniform number: the kept tokens are walked
// in token-id order (not probability order) until their cumulative mass
// passes uniform * kept mass. Same distribution as the reference's, and
// a walk the GPU sampler (ops/cuda/sampling.h, SampleRows) does with a
// prefix sum and no sort, so both backends pick the same token for the
// same draw (up to rounding at a boundary).

#ifndef LLAMA_WORKER_SAMPLING_SAMPLER_H_
#define LLAMA_WORKER_SAMPLING_SAMPLER_H_

#include <cstdint>
#include <random>
#include <vector>

#include "worker/sampling/sampling_params.h"

namespace llama {

// Index of the largest logit (the first one on ties, like torch.argmax on CPU).
int Argmax(const float* logits, int64_t n);

// log_softmax(logits)[token], computed stably: the reference's
// -cross_entropy(logits, token).
float LogProb(const float* logits, int64_t n, int token);

// The k (<= n) largest of log_softmax(logits), largest first (lower id
// first on ties): their ids into ids[0, k) and log-probabilities into
// logprobs[0, k).
void TopLogProbs(const float* logits, int64_t n, int k, int* ids, float* logprobs);

// The seed of stream `index` of a request seeded `seed` (SplitMix64 of the
// two): each row or choice draws from its own stream, so its tokens do not
// depend on the others or on the batch.
uint64_t StreamSeed(uint64_t seed, uint64_t index);

// A reproducible random stream: the same seed gives the same draws on
// every platform (std distributions are implementation-defined).
class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  // Uniform in [0, 1), 53 random bits.
  double Uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

 private:
  std::mt19937_64 engine_;
};

// Top-p sampling with reusable scratch space (one per generation row or thread).
// Two filters that servers add (vLLM, llama.cpp, Hugging Face) come first:
// top_k keeps the k most likely tokens (0: all), min_p those at least min_p
// times as likely as the most likely one (0: all); top_p then applies to
// what they keep, renormalised, as Hugging Face's warpers and vLLM do.
// Then typical_p (locally typical sampling, Hugging Face's
// TypicalLogitsWarper, which also runs after its top_p): of what is kept,
// renormalised, the tokens whose surprisal -log q is nearest the entropy
// H = -sum q log q, in that order, until their mass reaches typical_p.
// Without them, the reference's top-p exactly.
class TopPSampler {
 public:
  // s valid (TokenSampling::Validate) with temperature > 0; 0 <= uniform < 1.
  int Sample(const float* logits, int64_t n, const TokenSampling& s, double uniform);

  // The truncated, renormalised distribution Sample draws from: pairs of
  // (token, probability) in descending probability. For tests.
  std::vector<std::pair<int, double>> Distribution(const float* logits, int64_t n, const TokenSampling& s);

 private:
  // Fills order_ (token ids by descending probability) and probs_; returns
  // how many are kept.
  int64_t Prepare(const float* logits, int64_t n, const TokenSampling& s);
  // The typical_p filter over order_[0, kept); returns how many it keeps,
  // left in descending probability.
  int64_t KeepTypical(int64_t kept, double typical_p);

  std::vector<int> order_;
  std::vector<double> probs_;
  std::vector<double> scores_;  // KeepTypical's, by token id.
};

}  // namespace llama

#endif  // LLAMA_WORKER_SAMPLING_SAMPLER_H_
