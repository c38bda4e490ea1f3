// What the generator needs from a model: run some tokens of some sequences
// through it and get next-token logits back, or the next tokens themselves.

#ifndef LLAMA_WORKER_MODEL_LANGUAGE_MODEL_H_
#define LLAMA_WORKER_MODEL_LANGUAGE_MODEL_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "worker/sampling/sampler.h"
#include "worker/sampling/sampling_params.h"
#include "ops/kv_cache_view.h"

namespace llama {

// Tokens [start_pos, start_pos + tokens.size()) of a sequence whose keys
// and values live in the KV cache blocks `blocks` (its block table,
// ops/kv_cache_view.h: it must cover every position up to the chunk's
// last). Positions before start_pos must already be cached (by earlier
// chunks of the same sequence, or of another sequence that wrote the same
// tokens into the shared blocks).
struct SequenceChunk {
  absl::Span<const int32_t> blocks;
  int64_t start_pos = 0;
  absl::Span<const int> tokens;
  // Logits for every position of the chunk (for prompt log-probabilities),
  // not only the last.
  bool all_logits = false;
  // Speculative decoding: the chunk's last `proposed` tokens are guesses
  // at what follows the ones before them (0 to tokens.size() - 1). Logits
  // come for each of the last proposed + 1 positions, and ForwardAndChoose
  // picks a token at each: the caller keeps the guesses the picks confirm.
  int64_t proposed = 0;

  // The rows ForwardAndChoose picks for (choices and chosen, in order).
  int64_t choice_rows() const { return proposed + 1; }
};

// Added to a token's logit before the choice: OpenAI's logit_bias and
// frequency/presence penalties, as the engine computes them.
struct LogitAdjustment {
  int token = 0;
  float delta = 0.0f;
};

// How to pick a chunk's next token from its last row's logits: argmax at
// temperature 0, else sampling as `sampling` says (worker/sampling/sampler.h)
// driven by `uniform`, drawn by the caller from the row's own random stream.
struct TokenChoice {
  TokenSampling sampling = TokenSampling::Greedy();  // Valid (TokenSampling::Validate).
  double uniform = 0.0;  // In [0, 1).
  int top_logprobs = 0;  // Also report this many most likely tokens (0 to kMaxTopLogprobs).
  // Change the choice only: the log-probabilities reported are the model's
  // (vLLM's default). Tokens in [0, vocab_size), finite deltas.
  absl::Span<const LogitAdjustment> adjustments;
  // Structured output (worker/grammar/token_matcher.h): one bit per token,
  // bit t % 64 of word t / 64 set when token t may be chosen; nullptr: all
  // may. The tokens in also_allowed may be too (stop tokens, where the
  // grammar may end). Applied before the adjustments and every filter, to
  // this choice only; the log-probabilities reported stay the model's.
  const uint64_t* allowed = nullptr;
  absl::Span<const int> also_allowed;
};

inline constexpr int kMaxTopLogprobs = 5;

struct TopToken {
  int token = 0;
  float logprob = 0.0f;
};

struct ChosenToken {
  int token = 0;
  float logprob = 0.0f;  // log_softmax(logits)[token], at temperature 1 as the reference reports it.
  // The choice's top_logprobs most likely tokens, most likely first.
  int top_count = 0;
  std::array<TopToken, kMaxTopLogprobs> top;
};

// ForwardAndChoose's argument checks, shared by its implementations: one
// choice and one output per choice row (SequenceChunk::choice_rows), no
// chunk asking for all logits, proposals inside their chunk, adjustments
// inside the vocabulary.
absl::Status CheckChooseArguments(absl::Span<const SequenceChunk> chunks, absl::Span<const TokenChoice> choices,
                                  absl::Span<ChosenToken> chosen, int64_t vocab_size);

// Sets out[t] to -infinity for each token t that `allowed` (TokenChoice's
// mask) leaves out, and back to logits[t] for those in also_allowed.
void ApplyTokenMask(const uint64_t* allowed, absl::Span<const int> also_allowed, const float* logits,
                    absl::Span<float> out);

// What a model takes: its vocabulary, the sequences and tokens of one step
// and the KV cache (kv_blocks blocks of kv_block_size positions).
struct ModelLimits {
  int64_t vocab_size = 0;
  int max_batch_size = 0;  // Sequences one step may hold.
  int64_t max_seq_len = 0;
  int64_t max_step_tokens = 0;  // Summed over the chunks of one Forward call.
  int64_t kv_block_size = 0;
  int64_t kv_blocks = 0;

  // Entries of one sequence's block table: enough for max_seq_len.
  int64_t blocks_per_sequence() const { return KvBlocksFor(max_seq_len, kv_block_size); }
};

class LanguageModel;

// Block tables that give sequence s the blocks [s * n, (s + 1) * n), n
// enough for max_seq_len: fixed slots, for callers that run a fixed set of
// at most kv_blocks / n sequences (benchmarks, tests).
std::vector<std::vector<int32_t>> SlotBlockTables(const LanguageModel& model, int sequences);

class LanguageModel {
 public:
  virtual ~LanguageModel() = default;
  virtual const ModelLimits& limits() const = 0;

  // Runs the chunks as one batch and returns logits [rows, vocab_size]:
  // for each chunk in order, every position if all_logits, else the last
  // proposed + 1.
  // The span is valid until the next call.
  virtual absl::StatusOr<absl::Span<const float>> Forward(absl::Span<const SequenceChunk> chunks) = 0;

  // Runs the chunks (none with all_logits) as Forward does and picks a
  // token at each choice row (the last proposed + 1 of each chunk, in
  // order): row i by choices[i] into chosen[i]. This implementation
  // picks on the host from Forward's logits; a device backend overrides it
  // so that only the chosen tokens leave the device.
  virtual absl::Status ForwardAndChoose(absl::Span<const SequenceChunk> chunks,
                                        absl::Span<const TokenChoice> choices, absl::Span<ChosenToken> chosen);

 private:
  TopPSampler sampler_;
  std::vector<float> adjusted_;  // A row's logits with its choice's adjustments.
};

}  // namespace llama

#endif  // LLAMA_WORKER_MODEL_LANGUAGE_MODEL_H_
