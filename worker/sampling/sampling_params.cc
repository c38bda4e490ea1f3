#include "worker/sampling/sampling_params.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace llama {

std::string SamplingRange::Interval() const {
  return absl::StrFormat("%s%.10g, %.10g]", open_low ? "(" : "[", lo, hi);
}

std::string SamplingRange::OutOfRange(double value) const {
  return absl::StrFormat("%s: %g is out of range %s", name, value, Interval());
}

namespace {

absl::Status Check(const SamplingRange& range, double value) {
  // NaN fails Contains.
  if (!range.Contains(value)) return absl::InvalidArgumentError(range.OutOfRange(value));
  return absl::OkStatus();
}

}  // namespace

absl::Status TokenSampling::Validate() const {
  for (const auto& [range, value] : {std::pair<const SamplingRange&, double>{kTemperatureRange, temperature},
                                     {kTopPRange, top_p},
                                     {kTopKRange, top_k},
                                     {kMinPRange, min_p},
                                     {kTypicalPRange, typical_p}}) {
    if (absl::Status s = Check(range, value); !s.ok()) return s;
  }
  return absl::OkStatus();
}

SamplingParams SamplingParams::Greedy() {
  SamplingParams greedy;
  greedy.token = TokenSampling::Greedy();
  return greedy;
}

absl::Status SamplingParams::Validate(int64_t vocab_size) const {
  if (absl::Status s = token.Validate(); !s.ok()) return s;
  for (const auto& [range, value] : {std::pair<const SamplingRange&, double>{kPresencePenaltyRange, presence_penalty},
                                     {kFrequencyPenaltyRange, frequency_penalty}}) {
    if (absl::Status s = Check(range, value); !s.ok()) return s;
  }
  for (const LogitBias& b : logit_bias) {
    if (b.token < 0 || b.token >= vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrFormat("logit_bias: token id %d outside the vocabulary [0, %d)", b.token, vocab_size));
    }
    if (!kLogitBiasRange.Contains(b.delta)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("logit_bias: %g for token %d is out of range %s", b.delta, b.token, kLogitBiasRange.Interval()));
    }
  }
  return absl::OkStatus();
}

}  // namespace llama
