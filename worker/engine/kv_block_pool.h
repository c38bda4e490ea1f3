// Who owns which block of the paged KV cache (ops/kv_cache_view.h), and the
// prefix cache over them: vLLM's scheme. A full block is named by a hash
// chain over its tokens (its hash covers the hash of the block before it,
// so equal hashes mean equal prefixes); a new sequence whose prompt starts
// with cached blocks takes them instead of computing them again. Blocks are
// reference-counted: a block in no sequence's table but still cached is
// kept until the space is needed, least recently released first.
//
// Not thread-safe: the engine's step thread owns it.

#ifndef LLAMA_WORKER_ENGINE_KV_BLOCK_POOL_H_
#define LLAMA_WORKER_ENGINE_KV_BLOCK_POOL_H_

#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "worker/engine/kv_cache_events.h"

namespace llama {

class KvBlockPool {
 public:
  // `blocks` blocks of `block_size` positions; prefix caching off: blocks
  // are never shared and go back to the free list when released.
  KvBlockPool(int64_t blocks, int64_t block_size, bool prefix_caching);

  // Each full block cached from now on and each evicted is recorded there
  // (it must outlive the pool; null: none).
  void set_events(KvCacheEvents* events) { events_ = events; }

  int64_t blocks() const { return static_cast<int64_t>(blocks_.size()); }
  int64_t block_size() const { return block_size_; }
  // Blocks that Allocate can hand out: free ones and cached ones that no
  // sequence holds.
  int64_t available() const { return static_cast<int64_t>(free_.size() + evictable_.size()); }
  // Blocks some sequence holds.
  int64_t in_use() const { return blocks() - available(); }
  // Blocks holding a cached full block (held or not).
  int64_t cached() const { return static_cast<int64_t>(by_hash_.size()); }

  // The hash of the full block `tokens` (block_size of them) following the
  // block whose hash is `parent` (0 for the first).
  static uint64_t ChainHash(uint64_t parent, absl::Span<const int> tokens);

  // The cached blocks that hold `tokens`' leading full blocks, at most
  // `max_blocks` of them, each now held once more (Release each when done).
  // `hashes` receives their chain hashes.
  std::vector<int32_t> MatchPrefix(absl::Span<const int> tokens, int64_t max_blocks, std::vector<uint64_t>& hashes);

  // A block for a sequence to write, held once: a free block, else (unless
  // `evict` is false) the least recently released cached one, its hash
  // forgotten. None when there is no such block.
  std::optional<int32_t> Allocate(bool evict = true);

  // Marks `block`, which a sequence holds and has filled with `tokens`, as
  // the cached full block with chain hash `hash`. A block with that hash
  // already cached stays the one that is found; this one is then released
  // as an uncached block.
  void Cache(int32_t block, uint64_t hash, absl::Span<const int> tokens);

  // One holder lets go of `block`.
  void Release(int32_t block);

  // Every block is free, cached-and-released, or held, exactly once, and
  // the hash index agrees with the blocks: a message naming the first
  // inconsistency (for tests), else OK.
  absl::Status CheckConsistency() const;

  // The holders of `block`, for tests.
  int references(int32_t block) const { return blocks_[block].references; }

 private:
  struct Block {
    int references = 0;
    std::optional<uint64_t> hash;    // Set while cached.
    std::vector<int> tokens;         // What a cached block holds: a hash hit is checked against them.
    std::list<int32_t>::iterator lru;  // In evictable_ while cached with no holders.
  };

  void Forget(int32_t block);

  int64_t block_size_;
  bool prefix_caching_;
  KvCacheEvents* events_ = nullptr;
  std::vector<Block> blocks_;
  std::vector<int32_t> free_;       // Uncached, unheld.
  std::list<int32_t> evictable_;    // Cached, unheld: least recently released first.
  absl::flat_hash_map<uint64_t, int32_t> by_hash_;
};

}  // namespace llama

#endif  // LLAMA_WORKER_ENGINE_KV_BLOCK_POOL_H_
