// Which replica of a data-parallel server takes a request (launcher serve
// --data_parallel_size=N).
//
// `prefix` (the default) sends a request to the replica whose prefix cache
// holds the longest run of its leading token blocks, unless that replica is
// busier than the others by more than the balance allows; then, and for a
// prompt cached nowhere, to the least loaded (SGLang's router's
// cache-aware policy). The router's view of each replica's cache is a set
// of the engine's own block hashes (KvBlockPool::ChainHash over the
// prompt's tokens): blocks are added when a request is routed there (the
// engine caches them as it prefills) and kept in step with the engine by
// its cache events (worker/engine/kv_cache_events.h: stored, evicted), so
// a prefix the engine evicted stops attracting requests. It is bounded (the
// least recently used dropped first), and a replica that restarts starts
// with nothing.
//
// `least_loaded` picks the replica with the fewest prompt tokens in
// flight, `round_robin` the next one; both skip replicas that are down.

#ifndef LLAMA_LAUNCHER_REPLICA_ROUTER_H_
#define LLAMA_LAUNCHER_REPLICA_ROUTER_H_

#include <cstdint>
#include <list>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace llama {

enum class RoutingPolicy { kPrefix, kLeastLoaded, kRoundRobin };

// "prefix", "least_loaded" or "round_robin"; errors name --routing.
absl::StatusOr<RoutingPolicy> ParseRoutingPolicy(absl::string_view name);
absl::string_view RoutingPolicyName(RoutingPolicy policy);

struct RouterOptions {
  RoutingPolicy policy = RoutingPolicy::kPrefix;
  // Only a request's leading blocks up to this many are matched and
  // remembered (one huge prompt must not push every other prefix out).
  int max_blocks_per_request = 4096;
  // Blocks remembered per replica (an engine's KV cache rarely has more).
  int64_t max_blocks_per_replica = 256 * 1024;
  // The best match is skipped for the least loaded replica when its
  // requests in flight exceed the least loaded one's by more than both of
  // these (SGLang's balance thresholds).
  int balance_abs_requests = 8;
  double balance_rel = 1.5;
  // How long a block added on routing counts without the engine's Stored
  // event (well past the probes that read the events).
  absl::Duration pending_ttl = absl::Seconds(10);
};

class ReplicaRouter {
 public:
  ReplicaRouter(int replicas, RouterOptions options);

  // Picks a replica that is up for a request of `prompt_tokens` tokens
  // whose leading full blocks have the chain hashes `blocks` (empty when
  // unknown), and counts the request in flight there; -1 when none is up.
  int Route(const std::vector<uint64_t>& blocks, int64_t prompt_tokens);
  // The request routed to `replica` with `prompt_tokens` has ended.
  void Finished(int replica, int64_t prompt_tokens);

  // The engine's cache events: a block it cached, one it evicted.
  void Stored(int replica, uint64_t block);
  void Removed(int replica, uint64_t block);

  // A replica that is down is routed nothing.
  void SetUp(int replica, bool up);
  // A replica started again (or whose events were lost): its engine's
  // cache is unknown, and the router's view of it starts empty.
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
    int64_t tokens_in_flight = 0;
    Counts counts;
    struct Entry {
      std::list<uint64_t>::iterator place;  // In `recency` (front: most recent).
      // When it was added on routing a request there, until the engine's
      // Stored event confirms it (then absl::InfinitePast()).
      absl::Time pending_since;
    };
    std::list<uint64_t> recency;
    absl::flat_hash_map<uint64_t, Entry> blocks;
  };

  // Leading blocks of `blocks` that `replica` holds, up to the first it
  // does not (as the engine's own prefix match stops). A block added on
  // routing that no Stored event confirmed within pending_ttl (the request
  // failed, was turned away or cancelled, or the engine caches nothing) is
  // not held.
  size_t MatchedBlocks(const Replica& replica, const std::vector<uint64_t>& blocks, absl::Time now) const;
  // `confirmed`: from the engine's event; else on routing (pending).
  void Remember(Replica& replica, const std::vector<uint64_t>& blocks, bool confirmed);
  int LeastLoaded() const;
  int NextRoundRobin();

  const RouterOptions options_;
  mutable absl::Mutex mutex_;
  std::vector<Replica> replicas_;
  int next_ = 0;
};

}  // namespace llama

#endif  // LLAMA_LAUNCHER_REPLICA_ROUTER_H_
