// One API request's generation: an engine request per choice (prompts x
// n), and the events they send back turned into what the API returns:
// text (UTF-8 whole, cut at stop strings: text_output.h), log-probabilities
// and finish reasons, as deltas for a stream or accumulated for one answer.
// Shared between the HTTP handler and the engine's sinks (shared_ptr): a
// client that goes away leaves it alive until the engine is done with it.

#ifndef LLAMA_WORKER_SERVE_GENERATION_H_
#define LLAMA_WORKER_SERVE_GENERATION_H_

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "tokenizer/token_speller.h"
#include "tokenizer/tokenizer.h"
#include "worker/engine/engine_loop.h"
#include "worker/grammar/token_matcher.h"
#include "worker/serve/metrics.h"
#include "worker/serve/openai_api.h"
#include "worker/serve/text_output.h"

namespace llama {

struct ChoicePlan {
  std::vector<int> prompt_ids;
  std::string prompt_text;  // Led the text with echo.
  int64_t max_tokens = 0;
  // The server put BOS before a text prompt: it has no text in the echo.
  bool bos_added = false;
};

class ApiGeneration : public std::enable_shared_from_this<ApiGeneration> {
 public:
  struct Delta {
    int index = 0;
    ChoiceResult part;  // Text and tokens since the last delta; finish_reason on the last.
    bool first = false;  // The choice's first delta.
  };

  // With `grammar` (params.grammar compiled), every choice is constrained
  // by it.
  ApiGeneration(const Tokenizer& tokenizer, const GenerationParams& params, ServerMetrics* metrics,
                std::shared_ptr<grammar::TokenAutomaton> grammar = nullptr);

  // Called, on the engine's thread, after each event arrives (the server
  // then schedules a Next). Set before Start.
  void SetListener(std::function<void()> on_event) { on_event_ = std::move(on_event); }
  // One engine request per plan; a failed submit cancels those already in.
  absl::Status Start(EngineLoop& loop, const std::vector<ChoicePlan>& plans);
  // Waits up to `timeout` for news, then turns every event that came into
  // deltas (empty: nothing yet).
  std::vector<Delta> Next(absl::Duration timeout);
  bool done() const { return finished_ == static_cast<int>(choices_.size()); }
  // Every choice has been scheduled once (or has ended): the request no
  // longer waits in the queue.
  bool all_scheduled() const { return scheduled_ == static_cast<int>(choices_.size()); }
  // Why the answer is not whole: an engine failure (a rank lost:
  // Unavailable) or a cancellation (Cancelled, with Cancel's reason). Such
  // choices never report "length": a cancelled one ends with vLLM's
  // "abort", a failed one with no finish reason.
  const absl::Status& failure() const { return failure_; }
  // Ends every choice; `why` becomes failure() for the choices it cut.
  // Thread-safe (the client's going, a drain), unlike the rest.
  void Cancel(absl::Status why);

  // Everything so far, per choice, and the token counts.
  std::vector<ChoiceResult> Results() const;
  Usage usage() const;

 private:
  struct Event {
    int choice;
    RequestEvent::Kind kind;
    int token;
    float logprob;
    std::vector<TopToken> top;
    std::vector<float> prompt_logprobs;
    std::vector<TopToken> prompt_top;
    FinishReason finish;
    absl::Status status;
  };
  struct Choice {
    RequestId id = -1;
    ChoicePlan plan;
    std::unique_ptr<TextOutput> output;
    // Spells the generated tokens for logprobs in the context their text is
    // decoded in, as TextOutput decodes them: after the prompt when echoed,
    // else the generated tokens alone.
    std::optional<TokenSpeller> speller;
    int64_t spelled = 0;  // Bytes of the text the logged tokens stand for: the next one's offset.
    ChoiceResult result;
    bool started = false;  // Its first delta went out.
    bool scheduled = false;
    bool finished = false;
    int64_t generated = 0;
    std::chrono::steady_clock::time_point last_token;
  };

  void Apply(const Event& event, Delta& delta);
  // A token as logprobs name it: TokenField of its bytes, or "token_id:N".
  LoggedToken Logged(int token, std::string bytes, float logprob) const;
  // With logprobs, adds `token` (spelled `bytes`) to the delta's, and the
  // alternatives `top` as `speller` spells them at its place.
  void LogToken(Choice& c, Delta& delta, int token, std::string bytes, float logprob, absl::Span<const TopToken> top,
                const TokenSpeller& speller);

  const Tokenizer& tokenizer_;
  GenerationParams params_;
  ServerMetrics* metrics_;
  std::shared_ptr<grammar::TokenAutomaton> grammar_;
  EngineLoop* loop_ = nullptr;
  std::chrono::steady_clock::time_point arrival_;
  std::vector<Choice> choices_;
  int finished_ = 0;
  int scheduled_ = 0;
  absl::Status failure_;
  std::function<void()> on_event_;

  absl::Mutex mutex_;
  std::deque<Event> events_ ABSL_GUARDED_BY(mutex_);
  absl::Status cancel_reason_ ABSL_GUARDED_BY(mutex_);
  std::vector<RequestId> ids_ ABSL_GUARDED_BY(mutex_);  // The engine requests submitted, for Cancel.
};

}  // namespace llama

#endif  // LLAMA_WORKER_SERVE_GENERATION_H_
