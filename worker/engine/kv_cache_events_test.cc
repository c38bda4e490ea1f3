#include "worker/engine/kv_cache_events.h"

#include <vector>

#include <gtest/gtest.h>

#include "worker/engine/kv_block_pool.h"

namespace llama {
namespace {

std::vector<uint64_t> Hashes(const KvCacheEvents::Batch& batch, bool stored) {
  std::vector<uint64_t> out;
  for (const KvCacheEvents::Event& e : batch.events) {
    if (e.stored == stored) out.push_back(e.hash);
  }
  return out;
}

TEST(KvCacheEventsTest, ReadersGoOnFromWhereTheyStoppedAndStartOverWhenLeftBehind) {
  KvCacheEvents events(/*capacity=*/4);
  events.Stored(1);
  events.Stored(2);
  KvCacheEvents::Batch first = events.Since(0, 10);
  EXPECT_FALSE(first.reset);
  EXPECT_EQ(Hashes(first, true), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(first.next, 2u);
  events.Removed(1);
  KvCacheEvents::Batch second = events.Since(first.next, 10);
  EXPECT_EQ(Hashes(second, false), (std::vector<uint64_t>{1}));
  EXPECT_EQ(second.next, 3u);
  EXPECT_TRUE(events.Since(second.next, 10).events.empty());
  EXPECT_EQ(events.Since(second.next, 10).next, 3u);
  // Six more (events 4-9) keep only the last four (6-9): a reader at 3
  // missed 4 and 5.
  for (uint64_t h = 10; h < 16; ++h) events.Stored(h);
  KvCacheEvents::Batch behind = events.Since(3, 10);
  EXPECT_TRUE(behind.reset);
  EXPECT_EQ(Hashes(behind, true), (std::vector<uint64_t>{12, 13, 14, 15}));
  EXPECT_EQ(behind.next, 9u);
  // A reader past the last event read another journal (an engine since
  // restarted): it starts over from the first kept.
  KvCacheEvents::Batch ahead = events.Since(100, 10);
  EXPECT_TRUE(ahead.reset);
  EXPECT_EQ(Hashes(ahead, true), (std::vector<uint64_t>{12, 13, 14, 15}));
  EXPECT_NE(events.epoch(), KvCacheEvents().epoch());
  // At most `max` at a time: after 6 (hash 12), 7 and 8.
  KvCacheEvents::Batch two = events.Since(6, 2);
  EXPECT_EQ(Hashes(two, true), (std::vector<uint64_t>{13, 14}));
  EXPECT_EQ(two.next, 8u);
}

// The pool records a block when it starts to cache it and when it evicts it.
TEST(KvCacheEventsTest, ThePoolRecordsCachingAndEviction) {
  KvCacheEvents events;
  KvBlockPool pool(/*blocks=*/2, /*block_size=*/2, /*prefix_caching=*/true);
  pool.set_events(&events);
  const std::vector<int> a = {1, 2}, b = {3, 4}, c = {5, 6};
  const uint64_t ha = KvBlockPool::ChainHash(0, a), hb = KvBlockPool::ChainHash(0, b);
  const int32_t block_a = *pool.Allocate(), block_b = *pool.Allocate();
  pool.Cache(block_a, ha, a);
  pool.Cache(block_b, hb, b);
  pool.Cache(block_b, hb, b);  // Already cached: no second event.
  pool.Release(block_a);
  pool.Release(block_b);
  const int32_t block_c = *pool.Allocate();  // Evicts a, the least recently released.
  EXPECT_EQ(block_c, block_a);
  const KvCacheEvents::Batch batch = events.Since(0, 10);
  ASSERT_EQ(batch.events.size(), 3u);
  EXPECT_TRUE(batch.events[0].stored && batch.events[0].hash == ha);
  EXPECT_TRUE(batch.events[1].stored && batch.events[1].hash == hb);
  EXPECT_TRUE(!batch.events[2].stored && batch.events[2].hash == ha);
  (void)c;
}

}  // namespace
}  // namespace llama
