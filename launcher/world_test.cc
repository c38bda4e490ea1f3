#include "launcher/world.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace llama {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

// Every rank of every node, against rank = node_rank * nproc_per_node + local_rank.
TEST(WorldTest, EveryRankOfEveryLayout) {
  struct Layout {
    int nnodes, nproc_per_node;
  };
  for (const Layout layout : {Layout{1, 1}, Layout{1, 8}, Layout{2, 4}, Layout{4, 2}, Layout{3, 1}}) {
    std::vector<bool> seen(layout.nnodes * layout.nproc_per_node, false);
    for (int node = 0; node < layout.nnodes; ++node) {
      WorldOptions options;
      options.nnodes = layout.nnodes;
      options.nproc_per_node = layout.nproc_per_node;
      options.node_rank = node;
      absl::StatusOr<std::vector<WorkerEnvironment>> ranks = LocalRanks(options);
      ASSERT_TRUE(ranks.ok()) << ranks.status();
      ASSERT_EQ(ranks->size(), layout.nproc_per_node);
      for (int local = 0; local < layout.nproc_per_node; ++local) {
        const WorkerEnvironment& info = (*ranks)[local];
        EXPECT_EQ(info.rank, node * layout.nproc_per_node + local);
        EXPECT_EQ(info.local_rank, local);
        EXPECT_EQ(info.world_size, layout.nnodes * layout.nproc_per_node);
        EXPECT_EQ(info.local_world_size, layout.nproc_per_node);
        EXPECT_EQ(info.node_rank, node);
        EXPECT_FALSE(seen[info.rank]) << "rank " << info.rank << " assigned twice";
        seen[info.rank] = true;
      }
    }
    for (bool s : seen) EXPECT_TRUE(s);
  }
}

TEST(WorldTest, EnvironmentMatchesTorchrun) {
  WorldOptions options;
  options.nnodes = 2;
  options.nproc_per_node = 4;
  options.node_rank = 1;
  options.master_addr = "node0.cluster";
  absl::StatusOr<std::vector<WorkerEnvironment>> ranks = LocalRanks(options);
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  EXPECT_THAT(WorkerEnvironmentVariables((*ranks)[2]),
              ElementsAre(Pair("RANK", "6"), Pair("LOCAL_RANK", "2"), Pair("WORLD_SIZE", "8"),
                          Pair("LOCAL_WORLD_SIZE", "4"), Pair("GROUP_RANK", "1"),
                          Pair("MASTER_ADDR", "node0.cluster"), Pair("MASTER_PORT", "29500")));
}

TEST(WorldTest, RejectsBadOptionsNamingTheFlag) {
  struct Case {
    WorldOptions options;
    const char* expected;
  };
  auto with = [](auto edit) {
    WorldOptions options;
    edit(options);
    return options;
  };
  const Case cases[] = {
      {with([](WorldOptions& o) { o.nnodes = 0; }), "--nnodes=0"},
      {with([](WorldOptions& o) { o.nproc_per_node = -1; }), "--nproc_per_node=-1"},
      {with([](WorldOptions& o) { o.node_rank = 1; }), "--node_rank=1"},
      {with([](WorldOptions& o) { o.node_rank = -1; }), "--node_rank=-1"},
      {with([](WorldOptions& o) { o.master_addr = ""; }), "--master_addr"},
      {with([](WorldOptions& o) { o.master_port = 70000; }), "--master_port=70000"},
      {with([](WorldOptions& o) { o.master_port = 0; }), "--master_port=0"},
  };
  for (const Case& c : cases) {
    absl::Status status = ValidateWorldOptions(c.options);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.expected;
    EXPECT_THAT(status.message(), HasSubstr(c.expected));
    EXPECT_EQ(LocalRanks(c.options).status(), status);
  }
}

}  // namespace
}  // namespace llama
