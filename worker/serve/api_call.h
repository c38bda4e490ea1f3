// One generation request of the API server from admission to its last
// byte. The engine's events wake it (ApiGeneration's listener); a pump on
// the HTTP server's worker threads turns them into SSE chunks or, once
// done, into the one answer. A cancelled or failed answer ends with an
// error (a 503, or an error event), never as if complete.

#ifndef LLAMA_WORKER_SERVE_API_CALL_H_
#define LLAMA_WORKER_SERVE_API_CALL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "worker/http/http_server.h"
#include "worker/serve/generation.h"
#include "worker/serve/metrics.h"
#include "worker/serve/openai_api.h"

namespace llama {

class ApiCall;

// What a call needs of the server that admitted it; outlives its calls.
struct ApiCallHost {
  http::Server* http = nullptr;  // Runs the pump on its worker threads.
  ServerMetrics* metrics = nullptr;
  std::string model;  // The served model's name, in every answer.
  // Requests admitted and not yet scheduled: a call gives its place back
  // once every choice is scheduled (or it is done).
  std::atomic<int>* waiting_requests = nullptr;
  // Its answer is complete (or cut): the server lets go of it.
  std::function<void(ApiCall* call)> finished;
};

class ApiCall : public std::enable_shared_from_this<ApiCall> {
 public:
  ApiCall(const ApiCallHost* host, std::shared_ptr<http::Exchange> exchange,
          std::shared_ptr<ApiGeneration> generation, std::string id, bool chat, GenerationParams params);

  ApiGeneration& generation() { return *generation_; }

  // Runs Pump on a worker thread, at most one at a time; wake-ups that come
  // while it runs make it go round again.
  void Wake();
  // Once every choice is submitted: wakes it for a stream's head and the
  // events that came meanwhile (Wake does nothing before).
  void Arm();
  // The client went away: the generation is cancelled.
  void ClientGone();

 private:
  void Pump();
  // Turns what came into bytes for the client.
  void Drain();
  void DrainStream(const std::vector<ApiGeneration::Delta>& deltas, const absl::Status& failure);
  void DrainAnswer(const absl::Status& failure);
  void Finish(const absl::Status& failure);
  // With tools, choice `index`'s answer read as a call: the whole answer,
  // or one streamed delta (held back while it may be a call's start).
  void ReadToolCall(int index, ChoiceResult* answer) const;
  void ReadToolCallDelta(int index, ChoiceResult* delta);
  std::string ToolCallId(int index) const;

  const ApiCallHost* host_;
  std::shared_ptr<http::Exchange> exchange_;
  std::shared_ptr<ApiGeneration> generation_;
  const std::string id_;
  const int64_t created_;
  const bool chat_;
  const GenerationParams params_;
  std::atomic<bool> armed_{false};
  std::atomic<int> pending_{0};
  // Touched by the one running Pump only.
  bool released_ = false;  // Its place in the queue given back.
  bool stream_started_ = false;
  bool answered_ = false;
  std::vector<ToolCallStream> tool_streams_;  // Per choice, with tools.
};

}  // namespace llama

#endif  // LLAMA_WORKER_SERVE_API_CALL_H_
