#include "worker/engine/kv_cache_events.h"

#include <algorithm>

namespace llama {

void KvCacheEvents::Record(bool stored, uint64_t hash) {
  absl::MutexLock lock(&mutex_);
  events_.push_back({stored, hash});
  if (events_.size() > capacity_) {
    events_.pop_front();
    ++first_;
  }
}

KvCacheEvents::Batch KvCacheEvents::Since(uint64_t after, size_t max) const {
  absl::MutexLock lock(&mutex_);
  Batch batch;
  const uint64_t end = first_ + events_.size();  // One past the last event's number.
  uint64_t from = after + 1;
  if (from < first_) {
    batch.reset = after != 0 || first_ > 1;
    from = first_;
  }
  from = std::min(from, end);
  const uint64_t to = std::min<uint64_t>(end, from + max);
  for (uint64_t n = from; n < to; ++n) batch.events.push_back(events_[n - first_]);
  batch.next = to - 1;
  return batch;
}

}  // namespace llama
