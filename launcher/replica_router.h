// Which replica of a data-parallel server takes a request (launcher serve
// --data_parallel_size=N).
//
// `prefix` (the default) sends a request where its longest leading text
// was sent before, so that it finds those tokens in that replica's prefix
// cache, unless that replica is busier than the others by more than the
// balance allows; then, and for text seen nowhere, to the least loaded.
// This is SGLang's router's cache-aware policy. The router's view of a
// replica's cache is a bounded set of hashes of the leading text blocks it
// sent there (least recently used dropped first), not a copy of the
// engine's tree: cheap to keep and to match, and wrong only in the
// engine's favour (an evicted prefix costs one prefill). A replica that
// restarts comes back with nothing cached, and its hashes are dropped.
//
// `least_loaded` picks the replica with the fewest prompt bytes in flight,
// `round_robin` the next one; both skip replicas that are down.

#ifndef LLAMA_LAUNCHER_REPLICA_ROUTER_H_
#define LLAMA_LAUNCHER_REPLICA_ROUTER_H_

#include <cstdint>
#include <list>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace llama {

enum class RoutingPolicy { kPrefix, kLeastLoaded, kRoundRobin };

// "prefix", "least_loaded" or "round_robin"; errors name --routing.
absl::StatusOr<RoutingPolicy> ParseRoutingPolicy(absl::string_view name);
absl::string_view RoutingPolicyName(RoutingPolicy policy);

struct RouterOptions {
  RoutingPolicy policy = RoutingPolicy::kPrefix;
  // Bytes of text per hashed block: a prefix is matched to this precision.
  int block_bytes = 64;
  // Only a request's leading blocks up to this many are hashed and
  // remembered (one huge prompt must not push every other prefix out).
  int max_blocks_per_request = 4096;
  // Blocks remembered per replica (64 K of 64 bytes: 4 MiB of prompt text).
  int64_t max_blocks_per_replica = 64 * 1024;
  // The best match is skipped for the least loaded replica when its
  // requests in flight exceed the least loaded one's by more than both of
  // these (SGLang's balance thresholds).
  int balance_abs_requests = 8;
  double balance_rel = 1.5;
};

class ReplicaRouter {
 public:
  ReplicaRouter(int replicas, RouterOptions options);

  // Picks a replica that is up for a request whose routing text is `text`
  // and counts the request in flight there; -1 when none is up.
  int Route(absl::string_view text);
  // The request routed to `replica` with `text_bytes` of text has ended.
  void Finished(int replica, size_t text_bytes);

  // A replica that is down is routed nothing.
  void SetUp(int replica, bool up);
  // A replica started again: its engine's cache is empty, and so is the
  // router's memory of it.
  void Forget(int replica);
  bool up(int replica) const;
  int replicas_up() const;
  int replicas() const { return static_cast<int>(replicas_.size()); }

  struct Counts {
    int64_t routed = 0;
    int64_t prefix_routed = 0;  // Sent where a prefix of at least one block was remembered.
    int in_flight = 0;
  };
  Counts counts(int replica) const;

 private:
  struct Replica {
    bool up = false;
    int in_flight = 0;
    int64_t bytes_in_flight = 0;
    Counts counts;
    // Block hash -> its place in `recency` (front: most recent).
    std::list<uint64_t> recency;
    absl::flat_hash_map<uint64_t, std::list<uint64_t>::iterator> blocks;
  };

  // The hash of each whole leading block of `text`, each chained on the
  // last (at most max_blocks_per_request).
  std::vector<uint64_t> BlockHashes(absl::string_view text) const;
  // Leading blocks of `hashes` that `replica` remembers.
  static size_t MatchedBlocks(const Replica& replica, const std::vector<uint64_t>& hashes);
  void Remember(Replica& replica, const std::vector<uint64_t>& hashes);
  int LeastLoaded() const;
  int NextRoundRobin();

  const RouterOptions options_;
  mutable absl::Mutex mutex_;
  std::vector<Replica> replicas_;
  int next_ = 0;
};

}  // namespace llama

#endif  // LLAMA_LAUNCHER_REPLICA_ROUTER_H_
