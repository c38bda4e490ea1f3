#include "launcher/replica_router.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace llama {
namespace {

// The chain hashes of a prompt of `blocks` full blocks: those of prefix
// `seed` (two prompts of one seed share them), then `tail` blocks of their
// own.
std::vector<uint64_t> Blocks(int seed, int blocks, int tail = 0) {
  static uint64_t unique = 1u << 30;
  std::vector<uint64_t> out;
  for (int b = 0; b < blocks; ++b) out.push_back(static_cast<uint64_t>(seed) * 100000 + b);
  for (int t = 0; t < tail; ++t) out.push_back(unique++);
  return out;
}

constexpr int64_t kTokens = 256;

void AllUp(ReplicaRouter& router) {
  for (int r = 0; r < router.replicas(); ++r) router.SetUp(r, true);
}

TEST(ReplicaRouterTest, PoliciesParseByNameAndBadNamesNameTheFlag) {
  EXPECT_EQ(*ParseRoutingPolicy("prefix"), RoutingPolicy::kPrefix);
  EXPECT_EQ(*ParseRoutingPolicy("least_loaded"), RoutingPolicy::kLeastLoaded);
  EXPECT_EQ(*ParseRoutingPolicy("round_robin"), RoutingPolicy::kRoundRobin);
  EXPECT_EQ(ParseRoutingPolicy("random").status().message(),
            "--routing=random: expected prefix, least_loaded or round_robin");
}

TEST(ReplicaRouterTest, ASharedPrefixGoesWhereItIsCached) {
  ReplicaRouter router(4, RouterOptions());
  AllUp(router);
  // Eight system prompts, first sent anywhere; every later user of one
  // lands on its replica.
  std::vector<int> home(8);
  for (int s = 0; s < 8; ++s) {
    home[s] = router.Route(Blocks(s, 16, 1), kTokens);
    router.Finished(home[s], kTokens);
  }
  for (int user = 0; user < 40; ++user) {
    const int s = user % 8;
    const int r = router.Route(Blocks(s, 16, 1), kTokens);
    EXPECT_EQ(r, home[s]) << "system prompt " << s;
    router.Finished(r, kTokens);
  }
  for (int r = 0; r < 4; ++r) EXPECT_EQ(router.counts(r).routed, 12);  // The first sends spread.
  int64_t by_prefix = 0;
  for (int r = 0; r < 4; ++r) by_prefix += router.counts(r).prefix_routed;
  EXPECT_EQ(by_prefix, 40);
}

// The engine's events keep the view honest: a prefix it evicted attracts
// nothing any more; one it cached from elsewhere (another front end, a
// request before a restart of this one) does.
TEST(ReplicaRouterTest, TheEnginesEventsMoveTheView) {
  ReplicaRouter router(2, RouterOptions());
  AllUp(router);
  const std::vector<uint64_t> prompt = Blocks(1, 4);
  const int home = router.Route(prompt, kTokens);
  router.Finished(home, kTokens);
  EXPECT_EQ(router.Route(prompt, kTokens), home);
  router.Finished(home, kTokens);
  for (uint64_t block : prompt) router.Removed(home, block);
  const int64_t before = router.counts(home).prefix_routed + router.counts(1 - home).prefix_routed;
  const int next = router.Route(prompt, kTokens);  // Cached nowhere now: by load.
  router.Finished(next, kTokens);
  EXPECT_EQ(router.counts(home).prefix_routed + router.counts(1 - home).prefix_routed, before);
  // The other replica says it cached the first two blocks: they win there.
  const int other = 1 - next;
  for (int b = 0; b < 2; ++b) router.Removed(next, prompt[b]);
  router.Stored(other, prompt[0]);
  router.Stored(other, prompt[1]);
  EXPECT_EQ(router.Route(prompt, kTokens), other);
}

// Blocks added on routing count only while the engine may still confirm
// them: a request that never reached the cache draws nothing after the TTL.
TEST(ReplicaRouterTest, UnconfirmedBlocksExpire) {
  RouterOptions options;
  options.pending_ttl = absl::Milliseconds(50);
  ReplicaRouter router(2, options);
  AllUp(router);
  const std::vector<uint64_t> confirmed = Blocks(1, 4), failed = Blocks(2, 4);
  const int a = router.Route(confirmed, kTokens);
  router.Finished(a, kTokens);
  for (uint64_t block : confirmed) router.Stored(a, block);
  const int b = router.Route(failed, kTokens);
  router.Finished(b, kTokens);
  absl::SleepFor(absl::Milliseconds(100));
  const int64_t before = router.counts(0).prefix_routed + router.counts(1).prefix_routed;
  EXPECT_EQ(router.Route(confirmed, kTokens), a);
  router.Finished(a, kTokens);
  router.Route(failed, kTokens);
  EXPECT_EQ(router.counts(0).prefix_routed + router.counts(1).prefix_routed, before + 1);
}

TEST(ReplicaRouterTest, TheLongestLeadingRunWins) {
  ReplicaRouter router(2, RouterOptions());
  AllUp(router);
  std::vector<uint64_t> longer = Blocks(0, 2);
  const std::vector<uint64_t> more = Blocks(5, 6);
  longer.insert(longer.end(), more.begin(), more.end());
  // Replica 0 holds the two leading blocks and, without them, the rest:
  // only the leading run counts (the engine's own match stops at a gap).
  router.Stored(0, longer[0]);
  router.Stored(0, longer[1]);
  for (size_t b = 3; b < longer.size(); ++b) router.Stored(1, longer[b]);
  EXPECT_EQ(router.Route(longer, kTokens), 0);
}

TEST(ReplicaRouterTest, ABusyReplicaLosesItsPrefixToTheBalance) {
  RouterOptions options;
  options.balance_abs_requests = 2;
  options.balance_rel = 1.5;
  ReplicaRouter router(2, options);
  AllUp(router);
  const int home = router.Route(Blocks(1, 8), kTokens);
  // Without finishing: the home replica's requests in flight pile up.
  int moved = -1;
  for (int i = 0; i < 6; ++i) {
    if (router.Route(Blocks(1, 8, 1), kTokens) != home) {
      moved = i;
      break;
    }
  }
  // With 1 and 2 in flight it stays; with 3 (3 - 0 > 2, 3 > 1.5 x 0) the
  // request goes to the idle replica.
  EXPECT_EQ(moved, 2);
}

TEST(ReplicaRouterTest, ReplicasThatAreDownAreSkippedAndRestartedOnesForget) {
  ReplicaRouter router(2, RouterOptions());
  AllUp(router);
  const std::vector<uint64_t> prompt = Blocks(3, 4);
  const int home = router.Route(prompt, kTokens);
  router.Finished(home, kTokens);
  router.SetUp(home, false);
  EXPECT_EQ(router.replicas_up(), 1);
  const int other = router.Route(prompt, kTokens);
  EXPECT_NE(other, home);
  router.Finished(other, kTokens);
  // Down and up again (a slow /health): both hold the prefix, and the less
  // busy of the two takes it.
  router.SetUp(home, true);
  const int busy = router.Route(Blocks(9, 4), kTokens);
  EXPECT_NE(router.Route(prompt, kTokens), busy);
  router.Finished(busy, kTokens);
  // A restarted replica holds nothing: the prefix is `other`'s alone.
  router.Forget(home);
  EXPECT_EQ(router.Route(prompt, kTokens), other);
  router.SetUp(0, false);
  router.SetUp(1, false);
  EXPECT_EQ(router.Route(prompt, kTokens), -1);
}

TEST(ReplicaRouterTest, RoundRobinAndLeastLoaded) {
  RouterOptions options;
  options.policy = RoutingPolicy::kRoundRobin;
  ReplicaRouter rr(3, options);
  AllUp(rr);
  std::vector<int> order;
  for (int i = 0; i < 6; ++i) order.push_back(rr.Route(Blocks(0, 4), kTokens));
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 0, 1, 2}));

  options.policy = RoutingPolicy::kLeastLoaded;
  ReplicaRouter least(2, options);
  AllUp(least);
  const int big = least.Route({}, 10000);
  // Every short request goes to the other replica while the long one runs.
  for (int i = 0; i < 5; ++i) EXPECT_NE(least.Route({}, 10), big);
  least.Finished(big, 10000);
  EXPECT_EQ(least.Route({}, 10), big);
}

TEST(ReplicaRouterTest, OneHugePromptDoesNotPushOutEveryPrefix) {
  RouterOptions options;
  options.max_blocks_per_replica = 100;
  options.max_blocks_per_request = 50;
  ReplicaRouter router(1, options);
  AllUp(router);
  router.Finished(router.Route(Blocks(1, 10), kTokens), kTokens);
  router.Finished(router.Route(Blocks(2, 1000), kTokens), kTokens);
  router.Route(Blocks(1, 10), kTokens);
  // Only the huge prompt's first 50 blocks were remembered: the first
  // prompt's 10 are still there, and the third request matched them.
  EXPECT_EQ(router.counts(0).prefix_routed, 1);
}

TEST(ReplicaRouterTest, RememberedBlocksAreBounded) {
  RouterOptions options;
  options.max_blocks_per_replica = 10;
  ReplicaRouter router(2, options);
  AllUp(router);
  const int home = router.Route(Blocks(0, 8), kTokens);
  router.Finished(home, kTokens);
  // Eight more blocks on the same replica push the first prompt's tail out.
  router.SetUp(1 - home, false);
  router.Finished(router.Route(Blocks(13, 8), kTokens), kTokens);
  router.SetUp(1 - home, true);
  // Its two leading blocks are still there: routed home by prefix.
  const int64_t before = router.counts(home).prefix_routed;
  EXPECT_EQ(router.Route(Blocks(0, 8), kTokens), home);
  EXPECT_EQ(router.counts(home).prefix_routed, before + 1);
}

}  // namespace
}  // namespace llama
