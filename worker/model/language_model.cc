#include "worker/model/language_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace llama {

absl::Status CheckChooseArguments(absl::Span<const SequenceChunk> chunks, absl::Span<const TokenChoice> choices,
                                  absl::Span<ChosenToken> chosen, int64_t vocab_size) {
  int64_t rows = 0;
  for (size_t c = 0; c < chunks.size(); ++c) {
    const SequenceChunk& chunk = chunks[c];
    if (chunk.all_logits) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "chunk %d asks for all logits; ForwardAndChoose picks from the last rows only (use Forward)", c));
    }
    if (chunk.tokens.empty()) return absl::InvalidArgumentError(absl::StrFormat("chunk %d has no tokens", c));
    if (chunk.proposed < 0 || chunk.proposed >= static_cast<int64_t>(chunk.tokens.size())) {
      return absl::InvalidArgumentError(absl::StrFormat("chunk %d: %d proposed tokens in a chunk of %d; expected 0 to %d",
                                                        c, chunk.proposed, chunk.tokens.size(),
                                                        static_cast<int64_t>(chunk.tokens.size()) - 1));
    }
    rows += chunk.choice_rows();
  }
  if (static_cast<int64_t>(choices.size()) != rows || static_cast<int64_t>(chosen.size()) != rows) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%d chunks with %d rows to choose at but %d token choices and room for %d tokens",
                        chunks.size(), rows, choices.size(), chosen.size()));
  }
  for (size_t c = 0; c < choices.size(); ++c) {
    if (choices[c].top_logprobs < 0 || choices[c].top_logprobs > kMaxTopLogprobs) {
      return absl::InvalidArgumentError(absl::StrFormat("choice %d: %d top log-probabilities asked; at most %d", c,
                                                        choices[c].top_logprobs, kMaxTopLogprobs));
    }
    if (absl::Status s = choices[c].sampling.Validate(); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrFormat("choice %d: %s", c, s.message()));
    }
    for (const LogitAdjustment& a : choices[c].adjustments) {
      if (a.token < 0 || a.token >= vocab_size || !std::isfinite(a.delta)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "choice %d: logit adjustment %g of token %d; expected a finite value for a token in [0, %d)", c, a.delta,
            a.token, vocab_size));
      }
    }
  }
  return absl::OkStatus();
}

void ApplyTokenMask(const uint64_t* allowed, absl::Span<const int> also_allowed, const float* logits,
                    absl::Span<float> out) {
  const int64_t vocab = static_cast<int64_t>(out.size());
  for (int64_t w = 0; w * 64 < vocab; ++w) {
    const uint64_t bits = allowed[w];
    if (bits == ~uint64_t{0}) continue;
    const int64_t end = std::min<int64_t>(64, vocab - w * 64);
    for (int64_t i = 0; i < end; ++i) {
      if (!((bits >> i) & 1)) out[w * 64 + i] = -std::numeric_limits<float>::infinity();
    }
  }
  for (const int t : also_allowed) out[t] = logits[t];
}

std::vector<std::vector<int32_t>> SlotBlockTables(const LanguageModel& model, int sequences) {
  const int64_t per_sequence = model.limits().blocks_per_sequence();
  std::vector<std::vector<int32_t>> tables(sequences);
  for (int s = 0; s < sequences; ++s) {
    for (int64_t b = 0; b < per_sequence; ++b) tables[s].push_back(static_cast<int32_t>(s * per_sequence + b));
  }
  return tables;
}

absl::Status LanguageModel::ForwardAndChoose(absl::Span<const SequenceChunk> chunks,
                                             absl::Span<const TokenChoice> choices, absl::Span<ChosenToken> chosen) {
  const int64_t vocab = limits().vocab_size;
  RETURN_IF_ERROR(CheckChooseArguments(chunks, choices, chosen, vocab));
  ASSIGN_OR_RETURN(absl::Span<const float> logits, Forward(chunks));
  for (size_t i = 0; i < choices.size(); ++i) {
    const float* row = logits.data() + i * vocab;
    const TokenChoice& c = choices[i];
    const float* choose_from = row;
    if (c.allowed != nullptr || !c.adjustments.empty()) {
      adjusted_.assign(row, row + vocab);
      if (c.allowed != nullptr) ApplyTokenMask(c.allowed, c.also_allowed, row, absl::MakeSpan(adjusted_));
      for (const LogitAdjustment& a : c.adjustments) adjusted_[a.token] += a.delta;
      choose_from = adjusted_.data();
    }
    chosen[i].token =
        c.sampling.temperature > 0 ? sampler_.Sample(choose_from, vocab, c.sampling, c.uniform) : Argmax(choose_from, vocab);
    chosen[i].logprob = LogProb(row, vocab, chosen[i].token);
    chosen[i].top_count = static_cast<int>(std::min<int64_t>(c.top_logprobs, vocab));
    if (chosen[i].top_count > 0) {
      int ids[kMaxTopLogprobs];
      float logprobs[kMaxTopLogprobs];
      TopLogProbs(row, vocab, chosen[i].top_count, ids, logprobs);
      for (int j = 0; j < chosen[i].top_count; ++j) chosen[i].top[j] = {ids[j], logprobs[j]};
    }
  }
  return absl::OkStatus();
}

}  // namespace llama
