// The engine on a thread of its own, for a server: requests come from any
// thread (Submit, Cancel) and wake it; when no request is left it sleeps,
// and every `heartbeat_interval` of idleness it calls `heartbeat` (rank 0's
// LeaderModel::Heartbeat, so that the ranks waiting for the next step stay
// inside their collective deadline between requests).

#ifndef LLAMA_WORKER_ENGINE_ENGINE_LOOP_H_
#define LLAMA_WORKER_ENGINE_ENGINE_LOOP_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "worker/engine/engine.h"

namespace llama {

class EngineLoop {
 public:
  // `engine` must outlive the loop, and the loop is its only stepper.
  EngineLoop(Engine* engine, std::function<absl::Status()> heartbeat, std::chrono::milliseconds heartbeat_interval);
  // Stop(), then waits for the thread.
  ~EngineLoop();

  // Thread-safe. Fails once the engine has failed.
  absl::StatusOr<RequestId> Submit(EngineRequest request);
  void Cancel(RequestId id);

  // Lets the requests in flight finish, then ends the thread; returns at
  // once. Further Submits are refused.
  void Stop();
  // Waits until the thread has ended (after Stop, or a failure).
  void Join();
  // The thread has ended.
  bool finished() const { return finished_; }

  // OK while the engine works; its error (a rank lost, a model error, a
  // failed heartbeat) once it failed: every open request got it too.
  absl::Status status() const;
  EngineStats stats() const { return engine_->stats(); }
  const KvCacheEvents& cache_events() const { return engine_->cache_events(); }
  int64_t kv_block_size() const { return engine_->kv_block_size(); }

 private:
  void Run();

  Engine* engine_;
  std::function<absl::Status()> heartbeat_;
  std::chrono::milliseconds heartbeat_interval_;
  mutable absl::Mutex mutex_;
  bool woken_ ABSL_GUARDED_BY(mutex_) = false;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mutex_);
  std::atomic<bool> finished_{false};
  std::thread thread_;
};

}  // namespace llama

#endif  // LLAMA_WORKER_ENGINE_ENGINE_LOOP_H_
