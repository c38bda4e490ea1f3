// The OpenAI-compatible HTTP server (cpp-httplib) in front of the engine,
// on rank 0: POST /v1/completions and /v1/chat/completions (answers or
// Server-Sent Events), GET /v1/models, /health and /metrics. Errors in
// OpenAI's shape: 400 naming the field (or the prompt and context lengths),
// 401 without the right key (compared in constant time; /health and
// /metrics stay open), 404 for an unknown model or route, 413 for a body
// over the cap, 429 with Retry-After when --max_queue requests wait, 503
// while loading, draining or after the engine failed. A streaming client
// that goes away cancels its request at the next step.

#ifndef LLAMA_WORKER_SERVE_API_SERVER_H_
#define LLAMA_WORKER_SERVE_API_SERVER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "tokenizer/tokenizer.h"
#include "worker/engine/engine_loop.h"
#include "worker/serve/generation.h"
#include "worker/serve/metrics.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace llama {

struct ApiServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port.
  std::string model = "llama";
  std::vector<std::string> api_keys;  // Empty: no key needed.
  int max_queue = 256;                 // Requests waiting before 429.
  size_t max_body_bytes = size_t{8} << 20;
  int connection_threads = 64;  // Each open stream holds one.
  int read_timeout_seconds = 10;  // Headers and body must arrive within this.
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
  int port() const { return port_; }
  void SetReady() { ready_ = true; }
  // New generation requests get 503; those in flight go on.
  void SetDraining() { draining_ = true; }
  // Cancels every generation in flight (a drain that ran out of time).
  void CancelAll();
  // Stops listening and closes every connection.
  void Stop();

  ServerMetrics& metrics() { return metrics_; }

 private:
  void HandleCompletions(const httplib::Request& req, httplib::Response& res, bool chat);
  void HandleTokenize(const httplib::Request& req, httplib::Response& res);
  void HandleDetokenize(const httplib::Request& req, httplib::Response& res);
  // 401/503/404 checks shared by the generation routes; false when `res`
  // already holds the error.
  bool Admit(const httplib::Request& req, httplib::Response& res, const std::string& model);
  bool Authorized(const httplib::Request& req) const;
  void Reply(httplib::Response& res, const ApiError& error);
  void Track(const std::shared_ptr<ApiGeneration>& generation);

  EngineLoop* loop_;
  const Tokenizer* tokenizer_;
  int64_t context_;
  ApiServerOptions options_;
  int64_t created_;
  ServerMetrics metrics_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<bool> ready_{false};
  std::atomic<bool> draining_{false};
  std::atomic<uint64_t> next_id_{0};
  absl::Mutex mutex_;
  std::vector<std::weak_ptr<ApiGeneration>> active_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace llama

#endif  // LLAMA_WORKER_SERVE_API_SERVER_H_
