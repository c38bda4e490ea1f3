// A fixed set of worker threads for data-parallel loops in CPU kernels.

#ifndef LLAMA_OPS_CPU_THREAD_POOL_H_
#define LLAMA_OPS_CPU_THREAD_POOL_H_

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
  // 0 threads: one per hardware thread.
  explicit ThreadPool(int threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) on disjoint ranges covering [0, n), each at least
  // `grain` long (except the last), on the pool and the calling thread;
  // returns when all are done.
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void WorkerLoop(int index);
  void RunShare(int index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t chunk_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stopping_ = false;
};

}  // namespace llama

#endif  // LLAMA_OPS_CPU_THREAD_POOL_H_
