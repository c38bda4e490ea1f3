// What the generator needs from a model: run some tokens of some sequences
// through it and get next-token logits back.

#ifndef LLAMA_WORKER_LANGUAGE_MODEL_H_
#define LLAMA_WORKER_LANGUAGE_MODEL_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace llama {

// Tokens [start_pos, start_pos + tokens.size()) of the sequence cached in
// KV slot `slot`. Positions before start_pos must already be cached (by
// earlier chunks of the same slot).
struct SequenceChunk {
  int slot = 0;
  int64_t start_pos = 0;
  absl::Span<const int> tokens;
  // Logits for every position of the chunk (for prompt log-probabilities),
  // not only the last.
  bool all_logits = false;
};

class LanguageModel {
 public:
  virtual ~LanguageModel() = default;
  virtual int64_t vocab_size() const = 0;
  // KV cache slots: sequences that can be in flight at once.
  virtual int max_batch_size() const = 0;
  virtual int64_t max_seq_len() const = 0;
  // Most tokens (summed over chunks) one Forward call takes.
  virtual int64_t max_step_tokens() const = 0;

  // Runs the chunks as one batch and returns logits [rows, vocab_size]:
  // for each chunk in order, every position if all_logits, else the last.
  // The span is valid until the next call.
  virtual absl::StatusOr<absl::Span<const float>> Forward(absl::Span<const SequenceChunk> chunks) = 0;
};

}  // namespace llama

#endif  // LLAMA_WORKER_LANGUAGE_MODEL_H_
