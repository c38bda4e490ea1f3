#include "launcher/replica_router.h"

#include <string>

#include <gtest/gtest.h>

namespace llama {
namespace {

// A text of `blocks` 64-byte blocks drawn from `seed`.
std::string Text(int seed, int blocks, const std::string& tail = "") {
  std::string text;
  for (int b = 0; b < blocks; ++b) text += std::string(63, static_cast<char>('a' + (seed + b) % 26)) + "|";
  return text + tail;
}

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

TEST(ReplicaRouterTest, ASharedPrefixGoesWhereItWasSent) {
  RouterOptions options;
  ReplicaRouter router(4, options);
  AllUp(router);
  // Eight system prompts, first sent anywhere; every later user of one
  // lands on its replica.
  std::vector<int> home(8);
  for (int s = 0; s < 8; ++s) {
    const std::string text = Text(s, 16, "first user");
    home[s] = router.Route(text);
    router.Finished(home[s], text.size());
  }
  for (int user = 0; user < 40; ++user) {
    const int s = user % 8;
    const std::string text = Text(s, 16, "user " + std::to_string(user));
    const int r = router.Route(text);
    EXPECT_EQ(r, home[s]) << "system prompt " << s;
    router.Finished(r, text.size());
  }
  // The first sends spread over the replicas (least loaded, taking turns).
  for (int r = 0; r < 4; ++r) EXPECT_EQ(router.counts(r).routed, 12);
  int64_t by_prefix = 0;
  for (int r = 0; r < 4; ++r) by_prefix += router.counts(r).prefix_routed;
  EXPECT_EQ(by_prefix, 40);
}

TEST(ReplicaRouterTest, TheLongestMatchWins) {
  ReplicaRouter router(2, RouterOptions());
  AllUp(router);
  const int short_home = router.Route(Text(0, 2));
  router.Finished(short_home, 0);
  const int long_home = router.Route(Text(0, 2) + Text(5, 6));
  ASSERT_EQ(long_home, short_home);  // It shares the two leading blocks.
  router.Finished(long_home, 0);
  // A text sharing only one block with anything still goes there.
  EXPECT_EQ(router.Route(Text(0, 1) + Text(9, 3)), short_home);
}

TEST(ReplicaRouterTest, ABusyReplicaLosesItsPrefixToTheBalance) {
  RouterOptions options;
  options.balance_abs_requests = 2;
  options.balance_rel = 1.5;
  ReplicaRouter router(2, options);
  AllUp(router);
  const int home = router.Route(Text(1, 8));
  // Without finishing: the home replica's requests in flight pile up.
  int moved = -1;
  for (int i = 0; i < 6; ++i) {
    const int r = router.Route(Text(1, 8, std::to_string(i)));
    if (r != home) {
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
  const int home = router.Route(Text(3, 4));
  router.Finished(home, 0);
  router.SetUp(home, false);
  EXPECT_EQ(router.replicas_up(), 1);
  const int other = router.Route(Text(3, 4));
  EXPECT_NE(other, home);
  router.Finished(other, 0);
  // Down and up again (a slow /health): both remember the prefix, and the
  // less busy of the two takes it.
  router.SetUp(home, true);
  const int busy = router.Route(Text(9, 4));
  EXPECT_NE(router.Route(Text(3, 4)), busy);
  router.Finished(busy, 0);
  // A restarted replica remembers nothing: the prefix is `other`'s alone.
  router.Forget(home);
  EXPECT_EQ(router.Route(Text(3, 4)), other);
  router.SetUp(0, false);
  router.SetUp(1, false);
  EXPECT_EQ(router.Route("anything"), -1);
}

TEST(ReplicaRouterTest, RoundRobinAndLeastLoaded) {
  RouterOptions options;
  options.policy = RoutingPolicy::kRoundRobin;
  ReplicaRouter rr(3, options);
  AllUp(rr);
  std::vector<int> order;
  for (int i = 0; i < 6; ++i) order.push_back(rr.Route(Text(0, 4)));
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 0, 1, 2}));

  options.policy = RoutingPolicy::kLeastLoaded;
  ReplicaRouter least(2, options);
  AllUp(least);
  const int big = least.Route(std::string(10000, 'x'));
  // Every short request goes to the other replica while the long one runs.
  for (int i = 0; i < 5; ++i) EXPECT_NE(least.Route("short"), big);
  least.Finished(big, 10000);
  EXPECT_EQ(least.Route("short"), big);
}

TEST(ReplicaRouterTest, OneHugePromptDoesNotPushOutEveryPrefix) {
  RouterOptions options;
  options.max_blocks_per_replica = 100;
  options.max_blocks_per_request = 50;
  ReplicaRouter router(1, options);
  AllUp(router);
  router.Finished(router.Route(Text(1, 10)), 0);
  router.Finished(router.Route(Text(2, 1000)), 0);
  router.Route(Text(1, 10));
  // Only the huge prompt's first 50 blocks were remembered: the first
  // text's 10 are still there, and the third request matched them.
  EXPECT_EQ(router.counts(0).prefix_routed, 1);
}

TEST(ReplicaRouterTest, RememberedBlocksAreBounded) {
  RouterOptions options;
  options.max_blocks_per_replica = 10;
  ReplicaRouter router(2, options);
  AllUp(router);
  const int home = router.Route(Text(0, 8));
  router.Finished(home, 0);
  // Eight more blocks on the same replica push the first text's tail out.
  router.SetUp(1 - home, false);
  router.Finished(router.Route(Text(13, 8)), 0);
  router.SetUp(1 - home, true);
  // Its two leading blocks are still there: routed home by prefix.
  const int64_t before = router.counts(home).prefix_routed;
  EXPECT_EQ(router.Route(Text(0, 8)), home);
  EXPECT_EQ(router.counts(home).prefix_routed, before + 1);
}

}  // namespace
}  // namespace llama
