#include "worker/engine/kv_cache_events.h"

#include <algorithm>
#include <random>

namespace llama {

KvCacheEvents::KvCacheEvents(size_t capacity)
    : capacity_(capacity), epoch_(uint64_t{std::random_device()()} << 32 | std::random_device()()) {}

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
  if (from > end) {  // Past the last event: not this journal's reader.
    batch.reset = true;
    from = first_;
  }
  const uint64_t to = std::min<uint64_t>(end, from + max);
  for (uint64_t n = from; n < to; ++n) batch.events.push_back(events_[n - first_]);
  batch.next = to - 1;
  return batch;
}

}  // namespace llama
