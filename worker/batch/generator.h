// The reference's generation API (Llama.generate, text_completion,
// chat_completion) as a client of the serving engine (engine.h), with the
// same tokens and log-probabilities and less work:
//
// - Each prompt is prefilled in one pass (in pieces of the step budget),
//   instead of starting every row at the shortest prompt and feeding the
//   rest of longer prompts one token per step.
// - A row stops costing anything once it has produced EOS or reached its
//   length limit, min(len(prompt) + max_gen_len, max_seq_len), which is
//   where the reference's output for that row ends too; the next prompt
//   takes its place at once (continuous batching: max_batch_size is the
//   most rows in flight, and the reference refuses larger batches with an
//   assert).
//
// Where the reference is wrong, we are right
// (docs/differences-from-reference.md lists these): prompt
// log-probabilities with echo are never shifted by one position, and bad
// input is an error naming what is wrong, never an assert.

#ifndef LLAMA_WORKER_BATCH_GENERATOR_H_
#define LLAMA_WORKER_BATCH_GENERATOR_H_

#include <cstdint>
#include <optional>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tokenizer/chat_format.h"
#include "tokenizer/tokenizer.h"
#include "worker/engine/engine.h"
#include "worker/grammar/token_matcher.h"
#include "worker/model/language_model.h"
#include "worker/sampling/sampling_params.h"

namespace llama {

struct SamplingOptions {
  // Row i of a request samples from its own stream seeded by
  // (sampling.seed, i), so a row's tokens do not depend on the other rows
  // of its batch.
  SamplingParams sampling;
  // Default: max_seq_len - 1, as the reference.
  std::optional<int64_t> max_gen_len;
  bool logprobs = false;
  bool echo = false;  // Include the prompt in the output.
  // Structured output: every row's tokens follow this grammar (engine.h).
  std::shared_ptr<grammar::TokenAutomaton> grammar;
};

struct Generation {
  // Set only by the batch job's form (BatchSelection::each_alone): why
  // this prompt did not run; the other fields are then empty.
  absl::Status status;
  std::vector<int> tokens;
  std::vector<float> logprobs;  // Empty unless options.logprobs.
};

// The shape of the reference's text_completion / chat_completion results.
struct Completion {
  absl::Status status;                // As Generation::status.
  std::string generation;             // Decoded text (for chat: the content).
  std::vector<int> token_ids;
  std::vector<std::string> tokens;    // Each id decoded alone.
  std::vector<float> logprobs;        // Empty unless options.logprobs.
};

// The batch job's form of a call: some of the job's prompts (a resumed job
// runs those not done yet), each failing alone.
struct BatchSelection {
  // The job's index of each prompt given, in order: prompt i samples from
  // stream (seed, indices[i]) and is named by it in errors, as in a job that
  // ran them all. Empty: 0, 1, ...
  std::vector<size_t> indices;
  // A prompt that cannot run (it does not encode, is empty, longer than
  // max_seq_len, outside the vocabulary, or the engine fails it) gets a
  // result whose status says why, and the others run; otherwise the first
  // such prompt fails the call.
  bool each_alone = false;
};

// Not thread-safe: one call at a time (each runs an engine over the model's
// KV cache).
class Generator {
 public:
  // `model` must outlive the generator (with tensor parallelism, rank 0's
  // LeaderModel: the other ranks follow, lockstep.h). `tokenizer` may be
  // null for Generate alone; `stop_ids` are then the stop tokens (Llama 2:
  // 2); with a tokenizer its stop tokens are (Llama 3: <|end_of_text|>,
  // <|eot_id|>).
  Generator(LanguageModel* model, const Tokenizer* tokenizer, std::vector<int> stop_ids = {2},
            const EngineOptions& engine = {});

  // Called for each run of max_batch_size prompts, in order, once all of
  // them are done (later prompts may still be running), with the index of
  // its first prompt and its results, so the caller can keep finished
  // work; an error stops the job.
  using GenerationsDone = std::function<absl::Status(size_t first, absl::Span<const Generation> batch)>;
  using CompletionsDone = std::function<absl::Status(size_t first, absl::Span<const Completion> batch)>;

  absl::StatusOr<std::vector<Generation>> Generate(const std::vector<std::vector<int>>& prompt_tokens,
                                                   const SamplingOptions& options,
                                                   const GenerationsDone& on_batch = nullptr,
                                                   const BatchSelection& selection = {});

  // Prompts encoded with BOS; results decoded.
  absl::StatusOr<std::vector<Completion>> TextCompletion(const std::vector<std::string>& prompts,
                                                         const SamplingOptions& options,
                                                         const CompletionsDone& on_batch = nullptr,
                                                         const BatchSelection& selection = {});

  // Dialogs in the Llama 2 chat format; a dialog with special tags gets
  // kUnsafeRequestAnswer as its content, as in the reference.
  absl::StatusOr<std::vector<Completion>> ChatCompletion(const std::vector<Dialog>& dialogs,
                                                         const SamplingOptions& options,
                                                         const CompletionsDone& on_batch = nullptr,
                                                         const BatchSelection& selection = {});

  // The counters of the engine that ran the latest call (speculative
  // guesses among them).
  const EngineStats& engine_stats() const { return engine_stats_; }

 private:
  struct Row;
  absl::Status CheckOptions(const SamplingOptions& options) const;
  // The prompt non-empty, within max_seq_len and the vocabulary; `index`
  // names it.
  absl::Status CheckPrompt(size_t index, const std::vector<int>& prompt) const;
  // One engine request per prompt that can run, whose events fill rows[i];
  // a prompt with an error in `rows[i].status` is done already.
  absl::Status SubmitRows(Engine& engine, const std::vector<std::vector<int>>& prompts,
                          const SamplingOptions& options, const BatchSelection& selection,
                          std::vector<Row>& rows) const;
  // A finished row as the reference returns it.
  Generation Output(const Row& row, size_t prompt_len, const SamplingOptions& options) const;
  // Generate, with `errors[i]` (if not ok) as prompt i's result in place of
  // running it.
  absl::StatusOr<std::vector<Generation>> GenerateRows(const std::vector<std::vector<int>>& prompts,
                                                       std::vector<absl::Status> errors,
                                                       const SamplingOptions& options,
                                                       const GenerationsDone& on_batch,
                                                       const BatchSelection& selection);
  absl::StatusOr<std::vector<Completion>> Decode(absl::Span<const Generation> generations,
                                                 const SamplingOptions& options);
  // Generate, decoding each batch as it finishes; `unsafe[i]` replaces
  // prompt i's answer with kUnsafeRequestAnswer; a prompt whose
  // `encoded[i]` is an error fails alone or fails the call, as `selection`
  // says.
  absl::StatusOr<std::vector<Completion>> Complete(const std::vector<absl::StatusOr<std::vector<int>>>& encoded,
                                                   const std::vector<bool>& unsafe, const SamplingOptions& options,
                                                   const CompletionsDone& on_batch, const BatchSelection& selection);

  LanguageModel* model_;
  const Tokenizer* tokenizer_;
  std::vector<int> stop_ids_;
  EngineOptions engine_options_;
  EngineStats engine_stats_;
};

}  // namespace llama

#endif  // LLAMA_WORKER_BATCH_GENERATOR_H_
