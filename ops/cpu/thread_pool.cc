#include "ops/cpu/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace llama {
namespace {

// Tells the core this is a spin loop: it yields the pipeline to the other
// hyperthread and saves power.
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Reading the clock costs about as much as a pause: look every few dozen.
constexpr int kSpinsPerClockRead = 64;

// Pauses before a waiting thread starts to yield its core between looks
// (tens of microseconds). Pure spinning is fastest while every thread has a
// core; when the cores are shared (more threads than cores, other
// processes), a spinning thread holds the core the thread it waits for
// needs, and a 4-thread pool on 2 busy cores took milliseconds per call.
constexpr int kPausesBeforeYield = 1 << 11;

// One look of a wait loop: a pause at first, then a yield.
inline void WaitALittle(int spins) {
  if (spins < kPausesBeforeYield) {
    CpuRelax();
  } else {
    std::this_thread::yield();
  }
}

}  // namespace

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = std::max(1u, std::thread::hardware_concurrency());
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_.store(true);
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::RunShare(int index) {
  if (!guided_) {  // One element a thread.
    if (index < n_) (*fn_)(index, index + 1);
    return;
  }
  RunPieces();
}

void ThreadPool::RunPieces() {
  const int64_t divisor = 2 * static_cast<int64_t>(size());
  int64_t begin = next_.load(std::memory_order_relaxed);
  while (begin < n_) {
    const int64_t remaining = n_ - begin;
    const int64_t length = std::min(remaining, std::max(grain_, (remaining + divisor - 1) / divisor));
    // On failure `begin` is reloaded: another thread took those elements.
    if (next_.compare_exchange_weak(begin, begin + length, std::memory_order_relaxed)) {
      (*fn_)(begin, begin + length);
      begin = next_.load(std::memory_order_relaxed);
    }
  }
}

uint64_t ThreadPool::AwaitJob(uint64_t seen) {
  const auto give_up = std::chrono::steady_clock::now() + kSpinFor;
  for (int spins = 1;; ++spins) {
    const uint64_t generation = generation_.load(std::memory_order_acquire);
    if (generation != seen || stopping_.load(std::memory_order_relaxed)) return generation;
    WaitALittle(spins);
    if (spins % kSpinsPerClockRead == 0 && std::chrono::steady_clock::now() > give_up) break;
  }
  // Sleep. The count goes up before generation_ is read again, and the
  // caller bumps generation_ before it reads the count (both sequentially
  // consistent): either this thread sees the new job, or the caller sees a
  // sleeper and wakes it, taking the mutex so that the wake cannot fall
  // between the check and the wait.
  std::unique_lock<std::mutex> lock(mutex_);
  sleepers_.fetch_add(1);
  uint64_t generation;
  while ((generation = generation_.load()) == seen && !stopping_.load()) wake_.wait(lock);
  sleepers_.fetch_sub(1);
  return generation;
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  while (true) {
    seen = AwaitJob(seen);
    if (stopping_.load()) return;
    RunShare(index);
    pending_.fetch_sub(1, std::memory_order_release);
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t pieces = std::min<int64_t>(size(), std::max<int64_t>(1, n / std::max<int64_t>(grain, 1)));
  if (pieces <= 1) {
    fn(0, n);
    return;
  }
  fn_ = &fn;
  n_ = n;
  guided_ = n > size() || grain > 1;
  grain_ = std::max<int64_t>(grain, 1);
  next_.store(0, std::memory_order_relaxed);
  pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  generation_.fetch_add(1);
  if (sleepers_.load() > 0) {
    { std::lock_guard<std::mutex> lock(mutex_); }
    wake_.notify_all();
  }
  RunShare(0);
  for (int spins = 1; pending_.load(std::memory_order_acquire) != 0; ++spins) WaitALittle(spins);
}

}  // namespace llama
