#include "ops/cpu/thread_pool.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace llama {
namespace {

// Every index of [0, n) is visited exactly once, in ranges of at least
// `grain` (but the last).
void ExpectCovers(ThreadPool& pool, int64_t n, int64_t grain) {
  std::vector<std::atomic<int>> visits(n);
  std::atomic<int> short_ranges{0};
  pool.ParallelFor(n, grain, [&](int64_t begin, int64_t end) {
    if (end - begin < grain && end != n) short_ranges.fetch_add(1);
    for (int64_t i = begin; i < end; ++i) visits[i].fetch_add(1);
  });
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(visits[i].load(), 1) << "index " << i << " of " << n;
  EXPECT_EQ(short_ranges.load(), 0) << "n " << n << " grain " << grain;
}

TEST(ThreadPoolTest, RangesAreDisjointAndCoverEverything) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {0, 1, 2, 3, 7, 64, 1000}) {
      for (int64_t grain : {1, 4, 100}) ExpectCovers(pool, n, grain);
    }
  }
}

// Back-to-back calls, as a decode step makes them: each call sees its own
// job, never the previous one's, and returns only when all of it is done.
TEST(ThreadPoolTest, ManyCallsInARowEachRunWhole) {
  ThreadPool pool(4);
  std::vector<int64_t> sums(4, 0);
  for (int call = 0; call < 5000; ++call) {
    std::atomic<int64_t> sum{0};
    pool.ParallelFor(8, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) sum.fetch_add(call * 8 + i);
    });
    ASSERT_EQ(sum.load(), call * 64 + 28) << "call " << call;
  }
}

// Workers that went to sleep (no job for longer than their spin) wake for
// the next job, however many times that happens.
TEST(ThreadPoolTest, SleepingWorkersWakeForTheNextJob) {
  ThreadPool pool(3);
  for (int round = 0; round < 20; ++round) {
    std::this_thread::sleep_for(ThreadPool::kSpinFor * 2 + std::chrono::microseconds(round * 100));
    std::vector<std::thread::id> ran_on(3);
    pool.ParallelFor(3, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) ran_on[i] = std::this_thread::get_id();
    });
    EXPECT_EQ(ran_on[0], std::this_thread::get_id());
    EXPECT_NE(ran_on[1], ran_on[0]);
    EXPECT_NE(ran_on[2], ran_on[1]);
  }
}

// A pool is destroyed cleanly whether its workers spin, sleep or never ran.
TEST(ThreadPoolTest, DestructionJoinsSpinningAndSleepingWorkers) {
  { ThreadPool never_used(4); }
  {
    ThreadPool spinning(4);
    spinning.ParallelFor(4, 1, [](int64_t, int64_t) {});
  }
  {
    ThreadPool sleeping(4);
    sleeping.ParallelFor(4, 1, [](int64_t, int64_t) {});
    std::this_thread::sleep_for(ThreadPool::kSpinFor * 3);
  }
}

}  // namespace
}  // namespace llama
