// A fixed set of worker threads for data-parallel loops in CPU kernels.
//
// A decode step of a small model runs a few hundred ParallelFor calls of a
// few microseconds each, so what a call costs beyond its work is what
// decides whether two threads beat one. Waking a thread through a mutex and
// condition variable costs tens of microseconds (a futex round trip each
// way); here the job is published with one atomic store, idle workers spin
// on it for a while (kSpinFor) before they sleep, and the caller spins on a
// countdown until every share is done, as llama.cpp's and OpenMP's barriers
// do. Workers only sleep when no work came for kSpinFor, i.e. between
// steps, never between the operations of one step.

#ifndef LLAMA_OPS_CPU_THREAD_POOL_H_
#define LLAMA_OPS_CPU_THREAD_POOL_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace llama {

// ParallelFor may be called from one thread at a time (the engine's); the
// pool's threads run the pieces. Destruction joins the threads.
class ThreadPool {
 public:
  // How long an idle worker waits for the next job before it sleeps: longer
  // than the gap between two operations of a step (sampling and scheduling
  // between steps included), short enough that an idle server's workers
  // sleep at once.
  static constexpr std::chrono::microseconds kSpinFor{1000};

  // 0 threads: one per hardware thread.
  explicit ThreadPool(int threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) on disjoint ranges covering [0, n), each at least
  // `grain` long (except the last), on the pool and the calling thread;
  // returns when all are done. With n no more than size() each thread
  // takes one element (grain 1); else ranges are claimed by whichever thread is free,
  // guided self-scheduling as OpenMP's schedule(guided): each claim takes
  // 1/(2 size()) of what is left, so the first ranges are long (few claims)
  // and the last ones `grain` short, and a thread the OS or a memory stall
  // delays leaves its share to the others rather than holding up the call.
  // (A quarter of the job a claim, as before, left one thread idle for up
  // to a quarter of a 13 MB weight at the end of each linear; fixed halves
  // on a shared 2-core machine kept each thread waiting for the other for a
  // seventh of a small model's decode step.)
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void WorkerLoop(int index);
  // The first job generation after `seen` (or `seen` once stopping).
  uint64_t AwaitJob(uint64_t seen);
  void RunShare(int index);
  // Claims and runs ranges of the current job until none is left.
  void RunPieces();

  std::vector<std::thread> workers_;
  // The current job: written by the caller before generation_ moves on,
  // read by the workers after they see it move.
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t grain_ = 1;
  bool guided_ = false;  // Ranges claimed from next_, else one element a thread.
  // Each on its own cache line: the workers poll generation_ while they
  // claim pieces from next_ and count pending_ down.
  alignas(64) std::atomic<uint64_t> generation_{0};
  alignas(64) std::atomic<int64_t> next_{0};
  alignas(64) std::atomic<int> pending_{0};
  alignas(64) std::atomic<int> sleepers_{0};
  std::atomic<bool> stopping_{false};
  std::mutex mutex_;  // Guards only the sleep: sleepers_ and wake_.
  std::condition_variable wake_;
};

}  // namespace llama

#endif  // LLAMA_OPS_CPU_THREAD_POOL_H_
