#include "tools/perplexity_eval.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "worker/sampling/sampler.h"

namespace llama {

absl::StatusOr<Perplexity> MeasurePerplexity(LanguageModel& model, absl::Span<const int> tokens,
                                             const PerplexityOptions& options,
                                             const std::function<void(int64_t, double)>& on_chunk) {
  const ModelLimits& limits = model.limits();
  const int64_t context = options.context;
  if (context < 2 || context > limits.max_seq_len || context > limits.max_step_tokens) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a context of %d tokens: expected 2 to %d (the model's max_seq_len and max_step_tokens)", context,
        std::min(limits.max_seq_len, limits.max_step_tokens)));
  }
  int64_t chunks = static_cast<int64_t>(tokens.size()) / context;
  if (chunks == 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the text is %d tokens, fewer than one chunk of %d: give a longer text or a smaller context", tokens.size(),
        context));
  }
  if (options.max_chunks >= 0) chunks = std::min(chunks, options.max_chunks);
  const std::vector<int32_t> blocks = SlotBlockTables(model, 1)[0];
  const int64_t vocab = limits.vocab_size;
  const int64_t first = context / 2;
  std::vector<int> chunk(context);
  double sum = 0, sum_of_squares = 0;
  Perplexity result;
  for (int64_t c = 0; c < chunks; ++c) {
    chunk.assign(tokens.begin() + c * context, tokens.begin() + (c + 1) * context);
    if (options.bos_id >= 0) chunk[0] = options.bos_id;
    ASSIGN_OR_RETURN(const absl::Span<const float> logits, model.Forward({{blocks, 0, chunk, /*all_logits=*/true}}));
    // The logits at position j are the model's guess of token j + 1.
    for (int64_t j = first; j + 1 < context; ++j) {
      const double nll = -LogProb(logits.data() + j * vocab, vocab, chunk[j + 1]);
      sum += nll;
      sum_of_squares += nll * nll;
      ++result.scored_tokens;
    }
    result.chunks = c + 1;
    if (on_chunk) on_chunk(result.chunks, std::exp(sum / result.scored_tokens));
  }
  const double n = static_cast<double>(result.scored_tokens);
  const double mean = sum / n;
  result.value = std::exp(mean);
  const double variance = std::max(0.0, sum_of_squares / n - mean * mean);
  result.error = n > 1 ? result.value * std::sqrt(variance / (n - 1)) : 0;
  return result;
}

}  // namespace llama
