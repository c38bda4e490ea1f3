// The serving engine: continuous batching over the paged KV cache, as
// vLLM, TGI and TensorRT-LLM run. Requests arrive at any time (Submit, from
// any thread); each Step runs the running requests' next tokens first, then
// prefills waiting prompts in pieces up to a token budget, so a long prompt
// delays the others by at most one budget per step. Keys and values live in
// blocks taken as sequences grow; when they run out the most recently
// admitted request is preempted (its blocks freed) and computed again
// later from its tokens, which leaves its output unchanged. Prompts that
// start with blocks another request already computed reuse them (prefix
// caching, kv_block_pool.h).
//
// A request's tokens depend only on the request: sampling draws from its
// own random stream, seeded by the request. On the CPU backend the logits
// do not depend on the other requests either (see docs/batch-jobs.md,
// batch invariance), except where it says they can differ in the last bits.
//
// With tensor parallelism the engine runs on rank 0 over a LeaderModel
// (lockstep.h), and the other ranks follow its steps.
//
// Speculative decoding (EngineOptions::speculative_tokens): a decoding
// request's step may carry tokens guessed by n-gram lookup (ngram_lookup.h)
// or by a draft model after its last one, as extra rows of the step; the
// model picks a token at every row, each exactly as a plain decode step
// would pick it there (its random draw, penalties and grammar mask are
// those of that position), and the guesses the picks confirm are kept
// with the first pick that differs. Where the logits of a row do not depend
// on the rows beside it (the CPU backend), the answers are those of plain
// decoding, token for token and bit for bit; only the speed changes.

#ifndef LLAMA_WORKER_ENGINE_ENGINE_H_
#define LLAMA_WORKER_ENGINE_ENGINE_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "worker/engine/kv_block_pool.h"
#include "worker/engine/speculation_policy.h"
#include "worker/grammar/token_matcher.h"
#include "worker/model/language_model.h"
#include "worker/sampling/sampling_params.h"

namespace llama {

enum class FinishReason {
  kStop,       // A stop token was chosen (it is the last token reported).
  kLength,     // The token limit or the end of the context.
  kCancelled,  // Cancel was called.
  kError,      // The engine failed; the event's status says why.
};

// What a request's sink receives, in order: kScheduled when it first
// leaves the queue, its prompt's log-probabilities once if asked, each
// chosen token, then one kFinished (a request cancelled or failed while
// waiting gets kFinished alone).
struct RequestEvent {
  enum Kind { kScheduled, kPromptLogprobs, kToken, kFinished } kind = kToken;
  int token = 0;         // kToken.
  float logprob = 0.0f;  // kToken: log_softmax(logits)[token] at temperature 1, as the reference reports it.
  absl::Span<const TopToken> top;  // kToken: the request's top_logprobs most likely tokens.
  // kPromptLogprobs: [prompt length]; entry p is of prompt token p given
  // the ones before it, entry 0 is 0 (the reference's convention).
  absl::Span<const float> prompt_logprobs;
  // kPromptLogprobs with top_logprobs k: [prompt length * k]; entries
  // [p * k, (p + 1) * k) are the k most likely tokens at prompt position p,
  // most likely first (position 0's are zeros: nothing is before it).
  absl::Span<const TopToken> prompt_top;
  FinishReason finish = FinishReason::kLength;  // kFinished.
  absl::Status status;                          // kFinished with kError.
};

struct EngineRequest {
  std::vector<int> prompt;
  // How its tokens are chosen (worker/sampling/sampling_params.h); the
  // engine's default is argmax. sampling.seed seeds the request's random
  // stream (Rng). The penalties and logit_bias move the choice only: the
  // log-probabilities reported stay the model's.
  SamplingParams sampling = SamplingParams::Greedy();
  // Most tokens to generate; unset: up to the end of the context.
  std::optional<int64_t> max_new_tokens;
  std::vector<int> stop_ids;
  // No stop id is chosen before this many tokens (vLLM's min_tokens).
  int64_t min_new_tokens = 0;
  bool prompt_logprobs = false;
  // Each token event also carries this many most likely tokens (0 to 5),
  // and so does each prompt position with prompt_logprobs.
  int top_logprobs = 0;
  // Structured output: only tokens the grammar allows are chosen (masked
  // before the penalties and filters), a stop id only where the grammar
  // may end, and the request ends (kStop) when nothing more can follow.
  // Its vocabulary must be the model's.
  std::shared_ptr<grammar::TokenMatcher> grammar;
  // Called on the thread that runs Step, without the engine's lock: it may
  // Submit or Cancel, and must be quick.
  std::function<void(const RequestEvent&)> sink;
};

struct EngineOptions {
  // Tokens per step over every request (prefill pieces and decodes);
  // 0: the model's max_step_tokens.
  int64_t max_num_batched_tokens = 0;
  // Requests running at once; 0: the model's max_batch_size.
  int max_num_seqs = 0;
  bool prefix_caching = true;
  // Speculative decoding: up to this many guessed tokens per decoding
  // request and step (vLLM's num_speculative_tokens); 0: off.
  int speculative_tokens = 0;
  // Where the guesses come from: this model's greedy tokens when set (a
  // smaller model with the same vocabulary, or the target's weights in a
  // smaller type), else n-gram lookup in the request's text. The draft
  // keeps each request's tokens in its own KV cache (its limits' blocks);
  // it must outlive the engine, be another instance than `model` (they
  // would share cache blocks), and Step is its only caller. It runs on
  // this rank alone: with tensor parallelism only its guesses travel.
  LanguageModel* draft_model = nullptr;
  // Guess only as far as guesses are expected to pay for their rows
  // (speculation_policy.h); false: every guess found, up to the number
  // above, as vLLM does (the tests' fixed schedule).
  bool speculation_priced = true;
};

// Counters for metrics and tests.
struct EngineStats {
  int running = 0;
  int waiting = 0;
  int64_t kv_blocks_used = 0;
  int64_t kv_blocks_total = 0;
  int64_t prefix_hit_tokens = 0;   // Prompt tokens taken from cached blocks.
  int64_t prompt_tokens = 0;       // Prompt tokens of admitted requests (each admission once).
  int64_t computed_tokens = 0;     // Tokens run through the model, recomputation included.
  int64_t generated_tokens = 0;
  int64_t preemptions = 0;
  int64_t steps = 0;
  int64_t proposed_tokens = 0;  // Speculative guesses verified.
  int64_t accepted_tokens = 0;  // Of those, the ones the model confirmed.
  // Where the guesses come from: "ngram" or "draft" (metrics' source
  // label); empty without speculation.
  std::string speculation_source;

  // Tokens a request gets from a decode step: one, and its kept guesses.
  double tokens_per_request_step() const {
    return static_cast<double>(generated_tokens) / static_cast<double>(std::max<int64_t>(1, generated_tokens - accepted_tokens));
  }
  // "n-gram (or draft) speculation kept A of P guesses (R%), T tokens per
  // request step"; empty when nothing was guessed.
  std::string DescribeSpeculation() const;
};

using RequestId = int64_t;

// Submit's checks of a request against a model of `vocab` tokens and a
// context of `max_seq_len`: errors name the field.
absl::Status CheckEngineRequest(const EngineRequest& request, int64_t vocab, int64_t max_seq_len);

class Engine {
 public:
  // `model` must outlive the engine; Step is its only caller.
  Engine(LanguageModel* model, const EngineOptions& options);
  ~Engine();

  // Checks the request (prompt length and ids, SamplingParams::Validate,
  // token limit) and queues it; thread-safe. Errors name the field.
  absl::StatusOr<RequestId> Submit(EngineRequest request);
  // Ends the request at the next step (its sink gets kFinished with
  // kCancelled), whatever its state; unknown or finished ids are ignored.
  // Thread-safe.
  void Cancel(RequestId id);

  // One step: admits, schedules and runs the model once (twice when prompt
  // log-probabilities are being computed), then reports the chosen tokens.
  // A model error ends every request with kError and is returned; the
  // engine refuses work from then on.
  absl::Status Step();
  // Steps until no request is left.
  absl::Status RunUntilIdle();
  // No request submitted, running or waiting: from the thread that steps.
  bool idle() const;
  EngineStats stats() const;

  // The block pool, for tests' consistency checks.
  const KvBlockPool& block_pool() const { return pool_; }
  // The prefix cache's changes (thread-safe), and its block size: what a
  // router mirrors of this engine's cache.
  const KvCacheEvents& cache_events() const { return cache_events_; }
  int64_t kv_block_size() const { return model_->limits().kv_block_size; }
  // Each running request's blocks, for tests: no block may be held by two
  // requests unless it is a cached prefix block.
  std::vector<std::vector<int32_t>> running_block_tables() const;

 private:
  struct Sequence;
  struct Scheduled {
    Sequence* sequence;
    int64_t take;  // Rows, proposed ones included.
    bool scoring;  // all_logits piece of a prompt (Forward, not ForwardAndChoose).
    int64_t proposed = 0;  // Speculative guesses at the end of a decode.
  };

  // Moves newly submitted and cancelled requests in; ends cancelled ones.
  void Intake();
  void Finish(Sequence& s, FinishReason reason, const absl::Status& status = absl::OkStatus());
  // Blocks for positions [0, positions) of s; false when the pool is dry
  // (or, without `evict`, has no block that is neither held nor cached).
  bool Grow(Sequence& s, int64_t positions, bool evict = true);
  void Preempt(Sequence& s);
  // The running sequence admitted last (the preemption victim).
  Sequence* Newest();
  // Takes s's cached prefix and blocks for all its tokens; false (holding
  // nothing) when they are not free.
  bool Admit(Sequence& s);
  void RemoveFinished();
  // Sends s's prompt log-probabilities once they are complete, if asked.
  void ReportPromptLogprobs(Sequence& s);
  void Schedule(std::vector<Scheduled>& plan);
  // One step's model work: the scored prompt pieces, then the pieces that
  // feed or choose, each sequence updated from what came back.
  absl::Status Run(const std::vector<Scheduled>& plan);
  // Prompt pieces whose every position's logits are wanted: each prompt
  // token's log-probability; returns the positions computed.
  absl::StatusOr<int64_t> ScorePrompts(const std::vector<Scheduled>& plan);
  // Everything else, into chosen_: pieces that end where their sequence
  // ends pick its next token.
  absl::Status ChooseTokens(const std::vector<Scheduled>& plan);
  // A decode, guesses or not: its sequence's last token fed and its next
  // picked (asked before the step runs).
  static bool IsDecode(const Scheduled& p);
  // A decode that may guess this step: at most `count` guesses, found
  // into `guesses`.
  struct GuessWant {
    Scheduled* scheduled;
    int64_t count;
    std::vector<int> guesses;
  };
  // Of `guesses` for a decoding s whose one row is planned, those its
  // grammar allows, in order, with the KV blocks they need (only blocks
  // nobody holds or has cached: a guess neither preempts a request nor
  // evicts a cached prefix); returns how many, in s's verify buffer.
  int64_t Propose(Sequence& s, const std::vector<int>& guesses);
  // Each want's guesses: the draft model's greedy tokens after its text,
  // every request's draft step in one call per guess. A draft's cache is
  // first brought up to its text (a piece per step: no guesses while it
  // catches up); none when its pool is dry (its draft blocks are then
  // given back) or the draft fails.
  void Draft(std::vector<GuessWant>& wants);
  // Gives back s's blocks in the draft's pool.
  void ReleaseDraft(Sequence& s);
  // How s picks its next token, into choices_; `chooses`: this step does
  // pick it (its random draw and penalties are taken only then). With
  // `proposed` guesses, one choice per row: each as if the guesses before
  // it had been chosen.
  void AddChoices(Sequence& s, bool chooses, int64_t proposed);
  // After a scored piece: its blocks cached, its prompt's log-probabilities
  // reported once whole.
  void AfterScoring(Sequence& s);
  // After a fed piece: the chosen token appended and reported if the
  // piece reached the end, and each guess its row's pick confirmed with the
  // pick after it; returns the tokens appended (0 while prompt is left).
  int64_t AcceptChosen(Sequence& s, const Scheduled& p, absl::Span<const ChosenToken> chosen);
  // Appends and reports one chosen token; false when it ended s.
  bool Append(Sequence& s, const ChosenToken& chosen);
  // Feeds the chosen token to s's grammar; false when that ended s.
  bool AcceptByGrammar(Sequence& s, int token);
  void CacheFullBlocks(Sequence& s);
  void Fail(const absl::Status& status);
  int64_t PieceOf(const Sequence& s, int64_t budget, bool& scoring) const;

  LanguageModel* model_;
  EngineOptions options_;
  KvCacheEvents cache_events_;  // Before pool_, which records into it.
  KvBlockPool pool_;

  mutable absl::Mutex mutex_;
  RequestId next_id_ ABSL_GUARDED_BY(mutex_) = 0;
  std::vector<std::unique_ptr<Sequence>> submitted_ ABSL_GUARDED_BY(mutex_);
  absl::flat_hash_set<RequestId> cancelled_ ABSL_GUARDED_BY(mutex_);
  absl::Status failed_ ABSL_GUARDED_BY(mutex_);
  EngineStats stats_ ABSL_GUARDED_BY(mutex_);

  // Step thread only.
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;  // In admission order.
  uint64_t admissions_ = 0;
  StepCosts step_costs_;  // Of decode steps, for speculation.
  GuessRecord job_guesses_;  // Every verification's: a new request's prior.
  // The draft model's KV blocks (options_.draft_model), and what drafting
  // costs, added to a guess's row when pricing it: a round that brings
  // drafts up to their texts (and picks their first guesses) by the
  // tokens it reads, and each further guess (an exponential average,
  // seconds).
  std::optional<KvBlockPool> draft_pool_;
  StepCosts draft_catch_up_costs_;
  double draft_seconds_per_guess_ = 0;
  bool draft_failed_ = false;  // It failed once: no more drafting.
  bool guessed_last_step_ = false;  // The last decode step carried guesses.
  // Step buffers, reused.
  std::vector<SequenceChunk> chunks_;
  std::vector<TokenChoice> choices_;
  std::vector<ChosenToken> chosen_;
};

}  // namespace llama

#endif  // LLAMA_WORKER_ENGINE_ENGINE_H_
