#include "launcher/replica_router.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace llama {

absl::StatusOr<RoutingPolicy> ParseRoutingPolicy(absl::string_view name) {
  for (RoutingPolicy policy : {RoutingPolicy::kPrefix, RoutingPolicy::kLeastLoaded, RoutingPolicy::kRoundRobin}) {
    if (name == RoutingPolicyName(policy)) return policy;
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("--routing=%s: expected prefix, least_loaded or round_robin", name));
}

absl::string_view RoutingPolicyName(RoutingPolicy policy) {
  switch (policy) {
    case RoutingPolicy::kPrefix:
      return "prefix";
    case RoutingPolicy::kLeastLoaded:
      return "least_loaded";
    case RoutingPolicy::kRoundRobin:
      return "round_robin";
  }
  return "?";
}

ReplicaRouter::ReplicaRouter(int replicas, RouterOptions options) : options_(options), replicas_(replicas) {}

size_t ReplicaRouter::MatchedBlocks(const Replica& replica, const std::vector<uint64_t>& blocks,
                                    absl::Time now) const {
  const size_t most = std::min<size_t>(blocks.size(), options_.max_blocks_per_request);
  size_t matched = 0;
  for (; matched < most; ++matched) {
    const auto found = replica.blocks.find(blocks[matched]);
    if (found == replica.blocks.end()) break;
    const absl::Time pending_since = found->second.pending_since;
    if (pending_since != absl::InfinitePast() && now - pending_since > options_.pending_ttl) break;
  }
  return matched;
}

void ReplicaRouter::Remember(Replica& replica, const std::vector<uint64_t>& blocks, bool confirmed) {
  const size_t most = std::min<size_t>(blocks.size(), options_.max_blocks_per_request);
  const absl::Time now = absl::Now();
  // Leading blocks last, so that they are the most recent: a prefix's
  // blocks are dropped from its end.
  for (size_t i = most; i-- > 0;) {
    if (auto found = replica.blocks.find(blocks[i]); found != replica.blocks.end()) {
      replica.recency.splice(replica.recency.begin(), replica.recency, found->second.place);
      // Confirmed stays confirmed; a pending one is pending anew.
      if (confirmed || found->second.pending_since != absl::InfinitePast()) {
        found->second.pending_since = confirmed ? absl::InfinitePast() : now;
      }
      continue;
    }
    replica.recency.push_front(blocks[i]);
    replica.blocks[blocks[i]] = {replica.recency.begin(), confirmed ? absl::InfinitePast() : now};
  }
  while (static_cast<int64_t>(replica.recency.size()) > options_.max_blocks_per_replica) {
    replica.blocks.erase(replica.recency.back());
    replica.recency.pop_back();
  }
}

int ReplicaRouter::LeastLoaded() const {
  int best = -1;
  for (size_t i = 0; i < replicas_.size(); ++i) {
    // Starting after the last pick, so that ties take turns.
    const int r = static_cast<int>((next_ + i) % replicas_.size());
    const Replica& replica = replicas_[r];
    if (!replica.up) continue;
    if (best < 0 || replica.tokens_in_flight < replicas_[best].tokens_in_flight ||
        (replica.tokens_in_flight == replicas_[best].tokens_in_flight &&
         replica.in_flight < replicas_[best].in_flight)) {
      best = r;
    }
  }
  return best;
}

int ReplicaRouter::NextRoundRobin() {
  for (size_t i = 0; i < replicas_.size(); ++i) {
    const int r = static_cast<int>((next_ + i) % replicas_.size());
    if (replicas_[r].up) return r;
  }
  return -1;
}

int ReplicaRouter::Route(const std::vector<uint64_t>& hashes, int64_t prompt_tokens) {
  absl::MutexLock lock(&mutex_);
  int chosen = -1;
  bool by_prefix = false;
  switch (options_.policy) {
    case RoutingPolicy::kRoundRobin:
      chosen = NextRoundRobin();
      break;
    case RoutingPolicy::kLeastLoaded:
      chosen = LeastLoaded();
      break;
    case RoutingPolicy::kPrefix: {
      const absl::Time now = absl::Now();
      const int least = LeastLoaded();
      if (least < 0) break;
      chosen = least;
      size_t best_match = 0;
      int best = -1;
      for (size_t r = 0; r < replicas_.size(); ++r) {
        if (!replicas_[r].up) continue;
        const size_t matched = MatchedBlocks(replicas_[r], hashes, now);
        // Of equal matches (a prefix sent to several), the less busy.
        if (matched > best_match ||
            (matched == best_match && best >= 0 && matched > 0 &&
             replicas_[r].in_flight < replicas_[best].in_flight)) {
          best_match = matched;
          best = static_cast<int>(r);
        }
      }
      if (best >= 0) {
        const int busier = replicas_[best].in_flight - replicas_[least].in_flight;
        const bool unbalanced = busier > options_.balance_abs_requests &&
                                replicas_[best].in_flight > options_.balance_rel * replicas_[least].in_flight;
        if (!unbalanced) {
          chosen = best;
          by_prefix = true;
        }
      }
      break;
    }
  }
  if (chosen < 0) return -1;
  next_ = (chosen + 1) % static_cast<int>(replicas_.size());
  Replica& replica = replicas_[chosen];
  if (options_.policy == RoutingPolicy::kPrefix) Remember(replica, hashes, /*confirmed=*/false);
  ++replica.in_flight;
  replica.tokens_in_flight += prompt_tokens;
  ++replica.counts.routed;
  if (by_prefix) ++replica.counts.prefix_routed;
  return chosen;
}

void ReplicaRouter::Finished(int replica, int64_t prompt_tokens) {
  absl::MutexLock lock(&mutex_);
  Replica& r = replicas_[replica];
  r.in_flight = std::max(0, r.in_flight - 1);
  r.tokens_in_flight = std::max<int64_t>(0, r.tokens_in_flight - prompt_tokens);
}

void ReplicaRouter::Stored(int replica, uint64_t block) {
  absl::MutexLock lock(&mutex_);
  Remember(replicas_[replica], {block}, /*confirmed=*/true);
}

void ReplicaRouter::Removed(int replica, uint64_t block) {
  absl::MutexLock lock(&mutex_);
  Replica& r = replicas_[replica];
  if (auto found = r.blocks.find(block); found != r.blocks.end()) {
    r.recency.erase(found->second.place);
    r.blocks.erase(found);
  }
}

void ReplicaRouter::SetUp(int replica, bool up) {
  absl::MutexLock lock(&mutex_);
  replicas_[replica].up = up;
}

void ReplicaRouter::Forget(int replica) {
  absl::MutexLock lock(&mutex_);
  replicas_[replica].blocks.clear();
  replicas_[replica].recency.clear();
}

bool ReplicaRouter::up(int replica) const {
  absl::MutexLock lock(&mutex_);
  return replicas_[replica].up;
}

int ReplicaRouter::replicas_up() const {
  absl::MutexLock lock(&mutex_);
  return static_cast<int>(std::count_if(replicas_.begin(), replicas_.end(), [](const Replica& r) { return r.up; }));
}

ReplicaRouter::Counts ReplicaRouter::counts(int replica) const {
  absl::MutexLock lock(&mutex_);
  Counts counts = replicas_[replica].counts;
  counts.in_flight = replicas_[replica].in_flight;
  return counts;
}

}  // namespace llama
