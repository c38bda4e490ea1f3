#include "worker/model/language_model.h"

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "ops/status_macros.h"

namespace llama {

absl::Status CheckChooseArguments(absl::Span<const SequenceChunk> chunks, absl::Span<const TokenChoice> choices,
                                  absl::Span<ChosenToken> chosen) {
  if (choices.size() != chunks.size() || chosen.size() != chunks.size()) {
    return absl::InvalidArgumentError(absl::StrFormat("%d chunks but %d token choices and room for %d tokens",
                                                      chunks.size(), choices.size(), chosen.size()));
  }
  for (const SequenceChunk& chunk : chunks) {
    if (chunk.all_logits) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "chunk for slot %d asks for all logits; ForwardAndChoose picks from the last row only (use Forward)",
          chunk.slot));
    }
  }
  return absl::OkStatus();
}

absl::Status LanguageModel::ForwardAndChoose(absl::Span<const SequenceChunk> chunks,
                                             absl::Span<const TokenChoice> choices, absl::Span<ChosenToken> chosen) {
  RETURN_IF_ERROR(CheckChooseArguments(chunks, choices, chosen));
  absl::StatusOr<absl::Span<const float>> logits = Forward(chunks);
  if (!logits.ok()) return logits.status();
  const int64_t vocab = vocab_size();
  for (size_t i = 0; i < chunks.size(); ++i) {
    const float* row = logits->data() + i * vocab;
    const TokenChoice& c = choices[i];
    chosen[i].token = c.temperature > 0 ? sampler_.Sample(row, vocab, c.temperature, c.top_p, c.uniform)
                                        : cpu::Argmax(row, vocab);
    chosen[i].logprob = cpu::LogProb(row, vocab, chosen[i].token);
  }
  return absl::OkStatus();
}

}  // namespace llama
