#include "worker/engine/kv_block_pool.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "xxhash.h"

namespace llama {

KvBlockPool::KvBlockPool(int64_t blocks, int64_t block_size, bool prefix_caching)
    : block_size_(block_size), prefix_caching_(prefix_caching), blocks_(blocks) {
  // Lowest block first out, so that a fresh pool hands out 0, 1, 2, ...
  for (int64_t b = blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
}

uint64_t KvBlockPool::ChainHash(uint64_t parent, absl::Span<const int> tokens) {
  // XXH3 seeded with the parent's hash: 64 bits, so two different prefixes
  // share a hash with odds of about n^2 / 2^65 for n cached blocks; a hit
  // is checked against the block's own tokens as well.
  return XXH3_64bits_withSeed(tokens.data(), tokens.size() * sizeof(int), parent);
}

std::vector<int32_t> KvBlockPool::MatchPrefix(absl::Span<const int> tokens, int64_t max_blocks,
                                              std::vector<uint64_t>& hashes) {
  std::vector<int32_t> matched;
  hashes.clear();
  if (!prefix_caching_) return matched;
  uint64_t parent = 0;
  for (int64_t b = 0; b < max_blocks && (b + 1) * block_size_ <= static_cast<int64_t>(tokens.size()); ++b) {
    const absl::Span<const int> block_tokens = tokens.subspan(b * block_size_, block_size_);
    const uint64_t hash = ChainHash(parent, block_tokens);
    const auto it = by_hash_.find(hash);
    if (it == by_hash_.end()) break;
    Block& block = blocks_[it->second];
    if (!std::equal(block.tokens.begin(), block.tokens.end(), block_tokens.begin(), block_tokens.end())) break;
    if (block.references++ == 0) evictable_.erase(block.lru);
    matched.push_back(it->second);
    hashes.push_back(hash);
    parent = hash;
  }
  return matched;
}

std::optional<int32_t> KvBlockPool::Allocate(bool evict) {
  int32_t b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else if (evict && !evictable_.empty()) {
    b = evictable_.front();
    evictable_.pop_front();
    Forget(b);
  } else {
    return std::nullopt;
  }
  blocks_[b].references = 1;
  return b;
}

void KvBlockPool::Forget(int32_t b) {
  Block& block = blocks_[b];
  by_hash_.erase(*block.hash);
  if (events_ != nullptr) events_->Removed(*block.hash);
  block.hash.reset();
  block.tokens.clear();
}

void KvBlockPool::Cache(int32_t b, uint64_t hash, absl::Span<const int> tokens) {
  Block& block = blocks_[b];
  if (!prefix_caching_ || block.hash.has_value() || by_hash_.contains(hash)) return;
  block.hash = hash;
  block.tokens.assign(tokens.begin(), tokens.end());
  by_hash_[hash] = b;
  if (events_ != nullptr) events_->Stored(hash);
}

void KvBlockPool::Release(int32_t b) {
  Block& block = blocks_[b];
  if (--block.references > 0) return;
  if (block.hash.has_value()) {
    block.lru = evictable_.insert(evictable_.end(), b);
  } else {
    free_.push_back(b);
  }
}

absl::Status KvBlockPool::CheckConsistency() const {
  std::vector<int> seen(blocks_.size(), 0);
  for (int32_t b : free_) {
    if (blocks_[b].references != 0 || blocks_[b].hash.has_value()) {
      return absl::InternalError(absl::StrFormat("free block %d is held or cached", b));
    }
    ++seen[b];
  }
  for (int32_t b : evictable_) {
    if (blocks_[b].references != 0 || !blocks_[b].hash.has_value()) {
      return absl::InternalError(absl::StrFormat("evictable block %d is held or not cached", b));
    }
    ++seen[b];
  }
  for (size_t b = 0; b < blocks_.size(); ++b) {
    if (blocks_[b].references < 0) return absl::InternalError(absl::StrFormat("block %d released too often", b));
    if (blocks_[b].references > 0) ++seen[b];
    if (seen[b] != 1) {
      return absl::InternalError(absl::StrFormat("block %d is in %d of the free list, the evictable list and the held "
                                                 "blocks",
                                                 b, seen[b]));
    }
    if (blocks_[b].hash.has_value()) {
      const auto it = by_hash_.find(*blocks_[b].hash);
      if (it == by_hash_.end() || it->second != static_cast<int32_t>(b)) {
        return absl::InternalError(absl::StrFormat("cached block %d is not found by its hash", b));
      }
    }
  }
  for (const auto& [hash, b] : by_hash_) {
    if (blocks_[b].hash != hash) return absl::InternalError(absl::StrFormat("hash index names block %d wrongly", b));
  }
  return absl::OkStatus();
}

}  // namespace llama
