// The ring collectives with 1 to 4 ranks as threads of one process (each
// with its own store connection and sockets, as separate processes have).

#include "worker/collectives/tcp_communicator.h"

#include <cmath>
#include <functional>
#include <thread>
#include <vector>

#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "worker/collectives/thread_ranks.h"

namespace llama {
namespace {

using namespace std::chrono_literals;

void RunRanks(int world, const std::function<void(int, Communicator&)>& body) {
  testing::RunRanksOnThreads(world, body);
}

class TcpCommunicatorTest : public ::testing::TestWithParam<int> {};

TEST_P(TcpCommunicatorTest, AllReduceSumsBitIdentically) {
  const int world = GetParam();
  for (size_t count : {size_t{1}, size_t{3}, size_t{1000}, size_t{100003}}) {
    std::vector<std::vector<float>> results(world);
    RunRanks(world, [&](int rank, Communicator& comm) {
      std::vector<float> data(count);
      for (size_t i = 0; i < count; ++i) data[i] = std::sin(0.1f * i + rank) * (rank + 1);
      ASSERT_TRUE(comm.AllReduceSum(data.data(), count).ok());
      results[rank] = data;
    });
    for (size_t i = 0; i < count; ++i) {
      double expected = 0;
      for (int r = 0; r < world; ++r) expected += std::sin(0.1f * i + r) * (r + 1);
      ASSERT_NEAR(results[0][i], expected, 1e-5) << "count " << count << " index " << i;
    }
    for (int r = 1; r < world; ++r) ASSERT_EQ(results[r], results[0]) << "rank " << r << " differs";
  }
}

TEST_P(TcpCommunicatorTest, AllGatherAndBroadcast) {
  const int world = GetParam();
  std::vector<std::vector<float>> gathered(world);
  std::vector<std::vector<int>> broadcast(world);
  RunRanks(world, [&](int rank, Communicator& comm) {
    std::vector<float> mine = {float(rank), float(rank) + 0.5f};
    std::vector<float> all(2 * world);
    ASSERT_TRUE(comm.AllGather(mine.data(), 2, all.data()).ok());
    gathered[rank] = all;
    std::vector<int> tokens = {rank * 100, rank * 100 + 1};  // Differs per rank before the broadcast.
    ASSERT_TRUE(comm.Broadcast(tokens.data(), tokens.size() * sizeof(int), 0).ok());
    broadcast[rank] = tokens;
  });
  for (int r = 0; r < world; ++r) {
    for (int k = 0; k < world; ++k) {
      EXPECT_EQ(gathered[r][2 * k], k);
      EXPECT_EQ(gathered[r][2 * k + 1], k + 0.5f);
    }
    EXPECT_EQ(broadcast[r], (std::vector<int>{0, 1})) << r;
  }
}

// A row's sums do not depend on the rows reduced with it: every row of a
// 7-row all-reduce equals the same row reduced alone, bit for bit (the
// engine's batch invariance across ranks).
TEST_P(TcpCommunicatorTest, RowsAreSummedTheSameWhateverTheBatch) {
  const int world = GetParam();
  const size_t rows = 7, width = 24;  // Divisible by 1 to 4 ranks.
  std::vector<std::vector<float>> together(world), alone(world);
  RunRanks(world, [&](int rank, Communicator& comm) {
    std::vector<float> data(rows * width);
    for (size_t i = 0; i < data.size(); ++i) data[i] = std::sin(0.37f * i + rank) * std::pow(10.0f, (i + rank) % 7);
    std::vector<float> each = data;
    ASSERT_TRUE(comm.AllReduceSumRows(data.data(), rows, width).ok());
    for (size_t r = 0; r < rows; ++r) ASSERT_TRUE(comm.AllReduceSumRows(each.data() + r * width, 1, width).ok());
    together[rank] = data;
    alone[rank] = each;
  });
  for (int rank = 0; rank < world; ++rank) {
    for (size_t i = 0; i < rows * width; ++i) {
      ASSERT_EQ(together[rank][i], alone[rank][i]) << "rank " << rank << " row " << i / width << " column " << i % width;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, TcpCommunicatorTest, ::testing::Values(1, 2, 3, 4));

TEST(RendezvousTest, MissingRankIsNamedAtTheDeadline) {
  absl::StatusOr<net::Socket> listener = net::Listen("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok()) << listener.status();
  RendezvousOptions options;
  options.master_port = *net::LocalPort(*listener);
  options.listen_fd = listener->fd();
  options.world_size = 3;
  options.token = "t";
  options.join_timeout = 1s;
  std::thread rank1([&] {
    RendezvousOptions mine = options;
    mine.rank = 1;
    mine.listen_fd = -1;
    Rendezvous::Join(mine).status().IgnoreError();
  });
  absl::StatusOr<std::unique_ptr<Rendezvous>> rendezvous = Rendezvous::Join(options);
  rank1.join();
  EXPECT_EQ(rendezvous.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(rendezvous.status().message(), ::testing::HasSubstr("2/3 ranks joined after 1 s; missing: 2"));
}

// As the one-rank NCCL tests join: port 0 means any free one, no race.
TEST(RendezvousTest, OneRankTakesAnyFreePort) {
  RendezvousOptions options;
  options.master_port = 0;
  absl::StatusOr<std::unique_ptr<Rendezvous>> rendezvous = Rendezvous::Join(options);
  ASSERT_TRUE(rendezvous.ok()) << rendezvous.status();
  ASSERT_TRUE((*rendezvous)->store().Set("k", "v").ok());
  EXPECT_TRUE((*rendezvous)->Finish().ok());
}

TEST(RendezvousTest, ListeningSocketMustBeRankZerosAndOnMasterPort) {
  absl::StatusOr<net::Socket> listener = net::Listen("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok()) << listener.status();
  RendezvousOptions options;
  options.master_port = *net::LocalPort(*listener) == 65535 ? 65534 : *net::LocalPort(*listener) + 1;
  options.listen_fd = listener->fd();
  EXPECT_THAT(Rendezvous::Join(options).status().message(), ::testing::HasSubstr("not MASTER_PORT"));
  options.rank = 1;
  options.world_size = 2;
  options.token = "t";
  EXPECT_THAT(Rendezvous::Join(options).status().message(), ::testing::HasSubstr("only rank 0 hosts the store"));
  options.rank = 0;
  options.listen_fd = STDIN_FILENO;
  EXPECT_THAT(Rendezvous::Join(options).status().message(), ::testing::HasSubstr("not a listening socket"));
}

TEST(RendezvousTest, TokenIsRequiredForSeveralRanks) {
  RendezvousOptions options;
  options.world_size = 2;
  EXPECT_THAT(Rendezvous::Join(options).status().message(), ::testing::HasSubstr("RENDEZVOUS_TOKEN is not set"));
}

}  // namespace
}  // namespace llama
