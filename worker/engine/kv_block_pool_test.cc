#include "worker/engine/kv_block_pool.h"

#include <gtest/gtest.h>

#include <numeric>

namespace llama {
namespace {

std::vector<int> Iota(int n, int first) {
  std::vector<int> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

// Fills `count` blocks of `tokens` from block `first` on and caches them,
// as the engine does once a step has written them.
std::vector<int32_t> WriteAndCache(KvBlockPool& pool, const std::vector<int>& tokens, int64_t count) {
  std::vector<int32_t> blocks;
  uint64_t parent = 0;
  for (int64_t b = 0; b < count; ++b) {
    const int32_t block = *pool.Allocate();
    const absl::Span<const int> block_tokens = absl::MakeConstSpan(tokens).subspan(b * pool.block_size(),
                                                                                   pool.block_size());
    parent = KvBlockPool::ChainHash(parent, block_tokens);
    pool.Cache(block, parent, block_tokens);
    blocks.push_back(block);
  }
  return blocks;
}

TEST(KvBlockPoolTest, AllocatesEveryBlockOnceThenRefuses) {
  KvBlockPool pool(3, 4, /*prefix_caching=*/false);
  EXPECT_EQ(pool.Allocate(), 0);
  EXPECT_EQ(pool.Allocate(), 1);
  EXPECT_EQ(pool.Allocate(), 2);
  EXPECT_EQ(pool.Allocate(), std::nullopt);
  EXPECT_EQ(pool.in_use(), 3);
  pool.Release(1);
  EXPECT_EQ(pool.available(), 1);
  EXPECT_EQ(pool.Allocate(), 1);
  EXPECT_TRUE(pool.CheckConsistency().ok());
}

TEST(KvBlockPoolTest, SharedPrefixIsFoundAndReferenceCounted) {
  KvBlockPool pool(8, 4, /*prefix_caching=*/true);
  const std::vector<int> system = Iota(10, 100);  // Two full blocks and two tokens.
  const std::vector<int32_t> written = WriteAndCache(pool, system, 2);
  EXPECT_EQ(pool.cached(), 2);

  std::vector<int> other = system;
  other.push_back(7);
  std::vector<uint64_t> hashes;
  const std::vector<int32_t> matched = pool.MatchPrefix(other, 8, hashes);
  EXPECT_EQ(matched, written);
  ASSERT_EQ(hashes.size(), 2u);
  EXPECT_EQ(pool.references(written[0]), 2);
  // At most max_blocks (the engine leaves one token to compute).
  EXPECT_EQ(pool.MatchPrefix(other, 1, hashes).size(), 1u);
  EXPECT_EQ(pool.references(written[0]), 3);
  pool.Release(written[0]);

  // Another first block: nothing matches, even where later blocks are equal.
  std::vector<int> changed = other;
  changed[0] = 1;
  EXPECT_TRUE(pool.MatchPrefix(changed, 8, hashes).empty());
  EXPECT_TRUE(pool.CheckConsistency().ok()) << pool.CheckConsistency();

  for (int32_t b : written) pool.Release(b);
  for (int32_t b : matched) pool.Release(b);
  EXPECT_EQ(pool.in_use(), 0);
  EXPECT_EQ(pool.cached(), 2);  // Unheld but still cached, so still found.
  EXPECT_EQ(pool.MatchPrefix(other, 8, hashes), written);
  for (int32_t b : written) pool.Release(b);
  EXPECT_TRUE(pool.CheckConsistency().ok()) << pool.CheckConsistency();
}

TEST(KvBlockPoolTest, FreeBlocksGoFirstThenLeastRecentlyReleasedCachedOnes) {
  KvBlockPool pool(4, 2, /*prefix_caching=*/true);
  const std::vector<int32_t> a = WriteAndCache(pool, {1, 2}, 1), b = WriteAndCache(pool, {3, 4}, 1);
  pool.Release(b[0]);  // b released first: evicted first.
  pool.Release(a[0]);
  EXPECT_EQ(pool.available(), 4);
  const int32_t first = *pool.Allocate(), second = *pool.Allocate();
  EXPECT_NE(first, a[0]);
  EXPECT_NE(second, b[0]);  // The two free blocks go first.
  // Without eviction (a speculative guess's block) a cached one is not taken.
  EXPECT_EQ(pool.Allocate(/*evict=*/false), std::nullopt);
  EXPECT_EQ(pool.cached(), 2);
  EXPECT_EQ(pool.Allocate(), b[0]);
  EXPECT_EQ(pool.cached(), 1);
  std::vector<uint64_t> hashes;
  EXPECT_TRUE(pool.MatchPrefix(std::vector<int>{3, 4}, 1, hashes).empty());  // Evicted: forgotten.
  EXPECT_EQ(pool.MatchPrefix(std::vector<int>{1, 2}, 1, hashes), a);
  EXPECT_EQ(pool.Allocate(), std::nullopt);
  EXPECT_TRUE(pool.CheckConsistency().ok()) << pool.CheckConsistency();
}

TEST(KvBlockPoolTest, ADuplicateBlockIsNotCachedTwice) {
  KvBlockPool pool(4, 2, /*prefix_caching=*/true);
  const std::vector<int32_t> a = WriteAndCache(pool, {5, 6}, 1), b = WriteAndCache(pool, {5, 6}, 1);
  EXPECT_EQ(pool.cached(), 1);
  pool.Release(b[0]);  // Uncached: straight back to the free list.
  EXPECT_EQ(pool.available(), 3);
  std::vector<uint64_t> hashes;
  EXPECT_EQ(pool.MatchPrefix(std::vector<int>{5, 6}, 1, hashes), a);
  EXPECT_TRUE(pool.CheckConsistency().ok()) << pool.CheckConsistency();
}

TEST(KvBlockPoolTest, WithoutPrefixCachingNothingIsShared) {
  KvBlockPool pool(4, 2, /*prefix_caching=*/false);
  WriteAndCache(pool, {5, 6}, 1);
  std::vector<uint64_t> hashes;
  EXPECT_TRUE(pool.MatchPrefix(std::vector<int>{5, 6}, 1, hashes).empty());
  EXPECT_EQ(pool.cached(), 0);
}

TEST(KvBlockPoolTest, ConsistencyCheckNamesAnOverRelease) {
  KvBlockPool pool(2, 2, /*prefix_caching=*/false);
  const int32_t b = *pool.Allocate();
  pool.Release(b);
  pool.Release(b);
  EXPECT_EQ(pool.CheckConsistency().message(), "free block 0 is held or cached");
}

}  // namespace
}  // namespace llama
