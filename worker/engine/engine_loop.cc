#include "worker/engine/engine_loop.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace llama {

EngineLoop::EngineLoop(Engine* engine, std::function<absl::Status()> heartbeat,
                       std::chrono::milliseconds heartbeat_interval)
    : engine_(engine), heartbeat_(std::move(heartbeat)), heartbeat_interval_(heartbeat_interval) {
  thread_ = std::thread([this] {
    Run();
    finished_ = true;
  });
}

EngineLoop::~EngineLoop() {
  Stop();
  Join();
}

absl::StatusOr<RequestId> EngineLoop::Submit(EngineRequest request) {
  {
    absl::MutexLock lock(&mutex_);
    if (!status_.ok()) return absl::UnavailableError(absl::StrCat("the engine failed: ", status_.message()));
    if (stopping_) return absl::UnavailableError("the server is shutting down");
  }
  absl::StatusOr<RequestId> id = engine_->Submit(std::move(request));
  absl::MutexLock lock(&mutex_);
  woken_ = true;
  return id;
}

void EngineLoop::Cancel(RequestId id) {
  engine_->Cancel(id);
  absl::MutexLock lock(&mutex_);
  woken_ = true;
}

void EngineLoop::Stop() {
  absl::MutexLock lock(&mutex_);
  stopping_ = true;
  woken_ = true;
}

void EngineLoop::Join() {
  if (thread_.joinable()) thread_.join();
}

absl::Status EngineLoop::status() const {
  absl::MutexLock lock(&mutex_);
  return status_;
}

void EngineLoop::Run() {
  while (true) {
    if (engine_->idle()) {
      absl::MutexLock lock(&mutex_);
      if (stopping_) return;
      const bool woken = mutex_.AwaitWithTimeout(absl::Condition(&woken_), absl::FromChrono(heartbeat_interval_));
      woken_ = false;
      if (woken || stopping_ || heartbeat_ == nullptr) continue;
      mutex_.Unlock();
      const absl::Status beat = heartbeat_();
      mutex_.Lock();
      if (!beat.ok()) {
        status_ = beat;
        return;
      }
      continue;
    }
    const absl::Status step = engine_->Step();
    if (!step.ok()) {
      absl::MutexLock lock(&mutex_);
      status_ = step;
      return;
    }
  }
}

}  // namespace llama
