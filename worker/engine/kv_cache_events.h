// The prefix cache's changes, in order: each full block the pool starts to
// cache (its chain hash, KvBlockPool::ChainHash) and each it evicts. A
// router in front of several engines (launcher serve --data_parallel_size)
// mirrors from them which prompts each engine holds, as vLLM's KV events
// and llm-d's cache-aware scheduling do, instead of guessing from what it
// sent where.
//
// Thread-safe: the engine's thread records, any thread reads. Bounded: the
// oldest events go first, and a reader that fell behind them is told to
// start over (`reset`).

#ifndef LLAMA_WORKER_ENGINE_KV_CACHE_EVENTS_H_
#define LLAMA_WORKER_ENGINE_KV_CACHE_EVENTS_H_

#include <cstdint>
#include <deque>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace llama {

class KvCacheEvents {
 public:
  explicit KvCacheEvents(size_t capacity = size_t{1} << 17);

  // Random per journal (per engine start): a reader that sees another
  // epoch than before is reading a restarted engine and starts over.
  uint64_t epoch() const { return epoch_; }

  void Stored(uint64_t hash) { Record(true, hash); }
  void Removed(uint64_t hash) { Record(false, hash); }

  struct Event {
    bool stored;  // false: removed.
    uint64_t hash;
  };
  struct Batch {
    // Read on from here next time.
    uint64_t next = 0;
    // Events after `after` were dropped (or `after` is 0 while events were
    // already dropped), or `after` is past the last event (the reader read
    // another journal): the reader's mirror must start over from these.
    bool reset = false;
    std::vector<Event> events;
  };
  // The events numbered after `after` (0: from the first kept), at most `max`.
  Batch Since(uint64_t after, size_t max) const;

 private:
  void Record(bool stored, uint64_t hash);

  const size_t capacity_;
  const uint64_t epoch_;
  mutable absl::Mutex mutex_;
  std::deque<Event> events_ ABSL_GUARDED_BY(mutex_);
  uint64_t first_ ABSL_GUARDED_BY(mutex_) = 1;  // The number of events_.front().
};

}  // namespace llama

#endif  // LLAMA_WORKER_ENGINE_KV_CACHE_EVENTS_H_
