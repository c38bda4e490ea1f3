// The perplexity of a text under a model, measured as llama.cpp's
// llama-perplexity measures it, so that the two print comparable figures:
// the tokens cut into chunks of `context` (the rest dropped), each chunk
// started with BOS in place of its first token and run in one pass from an
// empty cache, and only its second half scored (every scored token has at
// least context / 2 tokens before it). Perplexity is exp of the mean
// negative log-likelihood of the scored tokens; its error is propagated
// from the standard error of that mean.

#ifndef LLAMA_TOOLS_PERPLEXITY_EVAL_H_
#define LLAMA_TOOLS_PERPLEXITY_EVAL_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "worker/model/language_model.h"

namespace llama {

struct PerplexityOptions {
  int64_t context = 512;    // Tokens per chunk (llama-perplexity's --ctx-size).
  int64_t max_chunks = -1;  // -1: every whole chunk.
  int bos_id = -1;          // Written over each chunk's first token; -1: none.
};

struct Perplexity {
  int64_t chunks = 0;
  int64_t scored_tokens = 0;
  double value = 0;
  double error = 0;  // value times the standard error of the mean negative log-likelihood.
};

// `on_chunk` (may be empty) hears the estimate after each chunk, 1-based.
absl::StatusOr<Perplexity> MeasurePerplexity(LanguageModel& model, absl::Span<const int> tokens,
                                             const PerplexityOptions& options,
                                             const std::function<void(int64_t chunk, double value)>& on_chunk = {});

}  // namespace llama

#endif  // LLAMA_TOOLS_PERPLEXITY_EVAL_H_
