// Rank 0's part of `launcher serve`: the engine over a LeaderModel (the
// other ranks follow it, worker/engine/lockstep.h), its loop with
// heartbeats, and the HTTP server, until SIGTERM or SIGINT (then a drain)
// or a failure. The caller blocks both signals in every thread first.

#ifndef LLAMA_WORKER_SERVE_RUN_SERVER_H_
#define LLAMA_WORKER_SERVE_RUN_SERVER_H_

#include <chrono>
#include <functional>

#include "absl/status/status.h"
#include "tokenizer/tokenizer.h"
#include "worker/collectives/communicator.h"
#include "worker/engine/engine.h"
#include "worker/model/language_model.h"
#include "worker/serve/api_server.h"

namespace llama {

struct RunServerOptions {
  ApiServerOptions api;
  EngineOptions engine;
  // How often an idle engine reassures the followers (well inside their
  // collective deadline).
  std::chrono::milliseconds heartbeat{std::chrono::seconds(10)};
  std::chrono::seconds drain_timeout{30};
  // Called once the server listens, with its port.
  std::function<void(int port)> on_ready;
};

// Returns OK after a drain that the followers were told of; an engine or
// collective failure otherwise.
absl::Status RunServer(LanguageModel& model, Communicator& host, const Tokenizer& tokenizer,
                       const RunServerOptions& options);

}  // namespace llama

#endif  // LLAMA_WORKER_SERVE_RUN_SERVER_H_
