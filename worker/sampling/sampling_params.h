// A request's sampling parameters, written once: each field, its default
// and its range. Every front end (the job's flags, the OpenAI API, the batch
// job, `launcher chat`) fills a SamplingParams and the engine takes one;
// the ranges are checked here (Validate) or, where a front end reports in
// its own spelling (`--top_p=0: ...`, `top_p: 0 is out of range (0, 1]`),
// against the same SamplingRange.
//
// A new parameter the sampler applies per token goes into TokenSampling
// (its default and its range below), the sampler (sampler.h), and the flag
// row and API field that name it: the engine, the model interface and the
// lockstep codec carry TokenSampling whole.

#ifndef LLAMA_WORKER_SAMPLING_SAMPLING_PARAMS_H_
#define LLAMA_WORKER_SAMPLING_SAMPLING_PARAMS_H_

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"

namespace llama {

// The closed interval [lo, hi], or (lo, hi] when open_low.
struct SamplingRange {
  const char* name;
  double lo;
  double hi;
  bool open_low = false;

  bool Contains(double value) const { return (open_low ? value > lo : value >= lo) && value <= hi; }
  // "(0, 1]", "[-2, 2]".
  std::string Interval() const;
  // The wording every check shares: "top_p: 0 is out of range (0, 1]".
  std::string OutOfRange(double value) const;
};

// The reference's defaults (example_text_completion.py) as doubles, for
// the flag table (a float's 0.6 is not a double's 0.6).
inline constexpr double kDefaultTemperature = 0.6;
inline constexpr double kDefaultTopP = 0.9;
inline constexpr double kDefaultTypicalP = 1.0;  // Off.

inline constexpr SamplingRange kTemperatureRange{"temperature", 0, 2};  // OpenAI's; 0: greedy.
inline constexpr SamplingRange kTopPRange{"top_p", 0, 1, /*open_low=*/true};
inline constexpr SamplingRange kTopKRange{"top_k", 0, 2147483647};
inline constexpr SamplingRange kMinPRange{"min_p", 0, 1};
inline constexpr SamplingRange kTypicalPRange{"typical_p", 0, 1, /*open_low=*/true};
inline constexpr SamplingRange kPresencePenaltyRange{"presence_penalty", -2, 2};
inline constexpr SamplingRange kFrequencyPenaltyRange{"frequency_penalty", -2, 2};
inline constexpr SamplingRange kLogitBiasRange{"logit_bias", -100, 100};

// What the sampler applies to each token's logits: softmax(logits /
// temperature) (argmax at 0), then the filters top_k, min_p, top_p,
// typical_p (sampler.h says how). Trivially copyable: the lockstep codec writes it as
// one block.
struct TokenSampling {
  float temperature = static_cast<float>(kDefaultTemperature);
  float top_p = static_cast<float>(kDefaultTopP);
  int32_t top_k = 0;    // The k most likely tokens; 0: all.
  float min_p = 0.0f;   // Tokens at least min_p times as likely as the most likely; 0: all.
  // Locally typical sampling (Hugging Face's TypicalLogitsWarper): the
  // tokens whose surprisal is nearest the entropy, up to this mass; 1: all.
  float typical_p = static_cast<float>(kDefaultTypicalP);

  // Argmax, every filter off.
  static constexpr TokenSampling Greedy() { return {0.0f, 1.0f, 0, 0.0f, 1.0f}; }
  // Each field in its range; the error names the first that is not.
  absl::Status Validate() const;
};
static_assert(std::is_trivially_copyable_v<TokenSampling>);

// Added to a token's logit before the choice (OpenAI's logit_bias).
struct LogitBias {
  int token = 0;
  float delta = 0.0f;
};

struct SamplingParams {
  TokenSampling token;
  // The request's random stream (sampler.h: Rng, StreamSeed).
  uint64_t seed = 1;
  // OpenAI's penalties on the tokens generated so far: a token's logit loses
  // frequency_penalty for every time it was generated and presence_penalty
  // once if it was. logit_bias is added to its tokens' logits (a token listed
  // twice gets both). They move the choice only: the log-probabilities
  // reported stay the model's.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::vector<LogitBias> logit_bias;

  // The engine's default: argmax, no filter, no penalty.
  static SamplingParams Greedy();
  // Every range, and logit_bias's tokens in [0, vocab_size); errors name the
  // field and the range.
  absl::Status Validate(int64_t vocab_size) const;
};

}  // namespace llama

#endif  // LLAMA_WORKER_SAMPLING_SAMPLING_PARAMS_H_
