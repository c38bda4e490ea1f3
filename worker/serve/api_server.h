// The OpenAI-compatible HTTP server in front of the engine, on rank 0:
// POST /v1/completions and /v1/chat/completions (answers or Server-Sent
// Events), /tokenize and /detokenize, GET /v1/models, /health and /metrics,
// on the event-driven server of //worker/http. /health, /metrics and
// /v1/models are answered on its I/O threads, never behind generation or
// slow clients; a stream is fed by the engine's events, not by a waiting
// thread. Errors in OpenAI's shape: 400 naming the field (or the prompt and
// context lengths), 401 without the right key (checked, in constant time,
// before the body is read; /health and /metrics stay open), 404 for an
// unknown model or route, 408/413/431 for a request past a limit, 429 with
// Retry-After when --max_queue requests wait, 503 while loading, draining,
// after the engine failed or past --max_connections. A client that goes
// away cancels its request, streamed or not; a cancelled or failed answer
// ends with an error (a 503, or an error event), never as if complete.

#ifndef LLAMA_WORKER_SERVE_API_SERVER_H_
#define LLAMA_WORKER_SERVE_API_SERVER_H_

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "tokenizer/tokenizer.h"
#include "worker/engine/engine_loop.h"
#include "worker/grammar/grammar_cache.h"
#include "worker/http/http_server.h"
#include "worker/serve/api_call.h"
#include "worker/serve/generation.h"
#include "worker/serve/metrics.h"
#include "worker/serve/openai_api.h"

namespace llama {

struct ApiServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port.
  std::string model = "llama";
  std::vector<std::string> api_keys;  // Empty: no key needed.
  // Requests admitted and not yet scheduled (none of their choices has
  // started) before a 429; a hard limit.
  int max_queue = 1024;
  http::Limits limits;
  int io_threads = 2;
  // Parse, tokenize and turn engine events into answers.
  int worker_threads = 2;
  bool access_log = false;  // A glog INFO line per request (http::AccessLogLine).
};

class ApiServer {
 public:
  // `loop` and `tokenizer` must outlive the server; `context` is the
  // model's max_seq_len.
  ApiServer(EngineLoop* loop, const Tokenizer* tokenizer, int64_t context, ApiServerOptions options);
  ~ApiServer();

  // Binds and serves on a thread of its own; /health says "loading" until
  // SetReady.
  absl::Status Start();
  int port() const { return http_.port(); }
  void SetReady() { ready_ = true; }
  // New generation requests get 503; those in flight go on.
  void SetDraining() { draining_ = true; }
  // Cancels every generation in flight (a drain that ran out of time).
  void CancelAll();
  // Stops listening and closes every connection.
  void Stop();

  ServerMetrics& metrics() { return metrics_; }

 private:
  // POST /v1/completions (chat: /v1/chat/completions): parsed, checked and
  // planned here, then answered by an ApiCall.
  void HandleCompletions(const std::shared_ptr<http::Exchange>& exchange, bool chat);
  void HandleTokenize(const std::shared_ptr<http::Exchange>& exchange);
  void HandleDetokenize(const std::shared_ptr<http::Exchange>& exchange);
  // 503 and 404, shared by the routes that use the model.
  std::optional<ApiError> Admit(const std::string& model);
  // The 401 for a request whose key is missing or wrong, checked on its head.
  std::optional<http::Response> CheckKey(const http::Request& head);
  // A 400 for text that cannot fit in the context, before tokenizing it.
  std::optional<ApiError> CheckPromptBytes(size_t bytes, const char* param) const;
  // A prompt's text (the 400s name "prompt") and chat messages ("messages")
  // as tokens; text that cannot fit is refused before it is tokenized.
  std::optional<ApiError> EncodeText(const std::string& text, bool bos, std::vector<int>* ids) const;
  // With `tools` (Llama 3 only), in Llama 3.1's tool-calling format.
  std::optional<ApiError> EncodeMessages(const Dialog& messages, const ToolUse& tools, ChatPrompt* prompt) const;
  // A completions request's prompts: text (BOS added) or token ids (as given).
  std::optional<ApiError> EncodeCompletionPrompts(const CompletionRequest& request,
                                                  std::vector<ChoicePlan>* prompts) const;
  // Each prompt's max_tokens, checked against the context: never cut silently.
  std::optional<ApiError> PlanLengths(const GenerationParams& params, bool chat,
                                      std::vector<ChoicePlan>& prompts) const;
  // A place in the queue, taken only if one is free (a hard limit).
  std::optional<ApiError> TakeQueuePlace();
  // Submits prompts x n choices and hands the answer to a new ApiCall.
  void StartCall(const std::shared_ptr<http::Exchange>& exchange, const std::string& id, bool chat,
                 const GenerationParams& params, const std::vector<ChoicePlan>& prompts,
                 std::shared_ptr<grammar::TokenAutomaton> grammar);
  // params.grammar compiled (shared with the requests that gave the same
  // one); null without one.
  absl::StatusOr<std::shared_ptr<grammar::TokenAutomaton>> CompileGrammar(const GenerationParams& params);
  void Finished(ApiCall* call);

  EngineLoop* loop_;
  const Tokenizer* tokenizer_;
  int64_t context_;
  ApiServerOptions options_;
  int64_t created_;
  size_t max_token_bytes_;  // The most bytes one vocabulary entry stands for.
  ServerMetrics metrics_;
  grammar::GrammarCache grammars_;
  ApiCallHost call_host_;  // Outlives http_, whose worker threads run the calls' pumps until it stops.
  http::Server http_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> draining_{false};
  // Ids are "<kind>-<salt><counter>": a random salt per server, so that
  // replicas behind one front end (launcher serve --data_parallel_size),
  // started in the same second, never give two answers one id.
  const uint64_t id_salt_ = std::random_device()() | uint64_t{1} << 32;
  std::atomic<uint64_t> next_id_{0};
  std::atomic<int> waiting_requests_{0};
  absl::Mutex mutex_;
  std::map<ApiCall*, std::shared_ptr<ApiCall>> calls_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace llama

#endif  // LLAMA_WORKER_SERVE_API_SERVER_H_
