#include "worker/collectives/tcp_store.h"

#include <atomic>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace llama {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

constexpr char kToken[] = "secret-token";

std::unique_ptr<TcpStoreServer> StartServer() {
  absl::StatusOr<std::unique_ptr<TcpStoreServer>> server = TcpStoreServer::Start("127.0.0.1", 0, kToken);
  EXPECT_TRUE(server.ok()) << server.status();
  return *std::move(server);
}

// A raw connection that has said hello as `rank` (invalid on failure), for
// clients that then misbehave byte by byte.
net::Socket RawHello(const TcpStoreServer& server, uint32_t rank) {
  absl::StatusOr<net::Socket> raw = net::Connect("127.0.0.1", server.port(), net::After(5s));
  if (!raw.ok()) {
    ADD_FAILURE() << raw.status();
    return net::Socket();
  }
  const auto d = net::After(5s);
  uint8_t answer = 1;
  const bool said = net::SendU32(*raw, 0x4B53324C, d, "store").ok() && net::SendU32(*raw, 1, d, "store").ok() &&
                    net::SendU32(*raw, rank, d, "store").ok() && net::SendString(*raw, kToken, d, "store").ok() &&
                    net::RecvAll(*raw, &answer, 1, d, "store").ok();
  if (!said || answer != 0) {
    ADD_FAILURE() << "no hello as rank " << rank;
    return net::Socket();
  }
  return *std::move(raw);
}

std::unique_ptr<TcpStoreClient> Join(const TcpStoreServer& server, int rank) {
  absl::StatusOr<std::unique_ptr<TcpStoreClient>> client =
      TcpStoreClient::Connect("127.0.0.1", server.port(), kToken, rank, net::After(5s));
  EXPECT_TRUE(client.ok()) << client.status();
  return *std::move(client);
}

TEST(TcpStoreTest, SetGetAddCheck) {
  auto server = StartServer();
  auto client = Join(*server, 0);
  ASSERT_TRUE(client->Set("a", std::string("x\0y", 3)).ok());
  EXPECT_EQ(*client->Get("a", 1s), std::string("x\0y", 3));
  EXPECT_EQ(*client->Add("n", 5), 5);
  EXPECT_EQ(*client->Add("n", -2), 3);
  EXPECT_TRUE(*client->Check("n"));
  EXPECT_FALSE(*client->Check("m"));
  EXPECT_THAT(client->Add("a", 1).status().message(), HasSubstr("does not hold an integer"));
  EXPECT_EQ(*client->Get("n", 1s), "3");  // Still usable after the refused Add.
}

TEST(TcpStoreTest, ManyClientsHammerACounter) {
  auto server = StartServer();
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      auto client = Join(*server, t);
      for (int i = 0; i < 200; ++i) {
        if (!client->Add("counter", 1).ok()) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(*Join(*server, 99)->Get("counter", 1s), "3200");
}

TEST(TcpStoreTest, ConcurrentWaitersAllWake) {
  auto server = StartServer();
  std::vector<std::thread> threads;
  std::atomic<int> woke{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      auto client = Join(*server, t);
      absl::StatusOr<std::string> v = client->Get("go", 10s);
      if (v.ok() && *v == "now") ++woke;
    });
  }
  // All 8 blocked on the key, so the Set must wake them (not merely be seen).
  for (int i = 0; i < 3000 && server->waiting() < 8; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(server->waiting(), 8);
  ASSERT_TRUE(Join(*server, 8)->Set("go", "now").ok());
  for (auto& t : threads) t.join();
  EXPECT_EQ(woke, 8);
  EXPECT_EQ(server->waiting(), 0);
}

TEST(TcpStoreTest, TimedOutWaitLeavesTheConnectionUsable) {
  auto server = StartServer();
  auto client = Join(*server, 0);
  const auto start = net::Clock::now();
  absl::StatusOr<std::string> v = client->Get("never", 100ms);
  EXPECT_EQ(v.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(v.status().message(), HasSubstr("key \"never\" not set within 100 ms"));
  EXPECT_LT(net::Clock::now() - start, 10s);  // Generous: a wait that ignored its timeout would hang.
  ASSERT_TRUE(client->Set("k", "v").ok());
  EXPECT_EQ(*client->Get("k", 1s), "v");
}

TEST(TcpStoreTest, WrongTokenIsRefused) {
  auto server = StartServer();
  absl::StatusOr<std::unique_ptr<TcpStoreClient>> client =
      TcpStoreClient::Connect("127.0.0.1", server->port(), "guess", 1, net::After(5s));
  EXPECT_EQ(client.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(client.status().message(), HasSubstr("RENDEZVOUS_TOKEN"));
}

// A client that says hello as rank 3 and vanishes mid-request is recorded
// as lost; a garbage frame closes only its own connection.
TEST(TcpStoreTest, BrokenClientsDoNotHurtTheStore) {
  auto server = StartServer();
  {
    net::Socket raw = RawHello(*server, 3);
    ASSERT_TRUE(raw.valid());
    const auto d = net::After(5s);
    const uint8_t partial[] = {1, 10, 0};  // kSet, then half a key length.
    ASSERT_TRUE(net::SendAll(raw, partial, sizeof partial, d, "store").ok());
  }  // Closed mid-message.
  {
    absl::StatusOr<net::Socket> raw = net::Connect("127.0.0.1", server->port(), net::After(5s));
    ASSERT_TRUE(raw.ok());
    const uint8_t garbage[] = {0xFF, 0xFF, 0xFF, 0xFF, 0x7F, 0x00, 0x01};
    net::SendAll(*raw, garbage, sizeof garbage, net::After(5s), "store").IgnoreError();
  }
  auto client = Join(*server, 0);
  EXPECT_EQ(*client->Get("lost/3", 5s), "1");
  ASSERT_TRUE(client->Set("still", "serving").ok());
  EXPECT_EQ(*client->Get("still", 1s), "serving");
  // A clean goodbye is not a loss (acknowledged: nothing left to wait for).
  ASSERT_TRUE(Join(*server, 4)->Close().ok());
  EXPECT_FALSE(*client->Check("lost/4"));
}

// A rank that dies while it waits in a Get is reported lost at once, not
// when its wait would have ended.
TEST(TcpStoreTest, ARankThatDiesWhileWaitingIsLostAtOnce) {
  auto server = StartServer();
  {
    net::Socket raw = RawHello(*server, 7);
    ASSERT_TRUE(raw.valid());
    const auto d = net::After(5s);
    const uint8_t get = 2;
    ASSERT_TRUE(net::SendAll(raw, &get, 1, d, "store").ok());
    ASSERT_TRUE(net::SendString(raw, "never/set", d, "store").ok());
    ASSERT_TRUE(net::SendU32(raw, 600000, d, "store").ok());  // Ten minutes.
    for (int i = 0; i < 100 && server->waiting() == 0; ++i) std::this_thread::sleep_for(10ms);
    ASSERT_EQ(server->waiting(), 1);
  }  // Killed mid-wait.
  auto client = Join(*server, 0);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(*client->Get("lost/7", 5s), "1");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
}

// Connections that come and go, with or without a hello, leave no thread
// behind; silent ones past kMaxGreeting are closed at once, and ranks are
// served all the while.
TEST(TcpStoreTest, ConnectionsThatLeaveAreJoinedAndSilentOnesAreCapped) {
  auto server = StartServer();
  for (int i = 0; i < 500; ++i) {
    absl::StatusOr<net::Socket> raw = net::Connect("127.0.0.1", server->port(), net::After(5s));
    ASSERT_TRUE(raw.ok());
  }
  for (int i = 0; i < 50 && server->client_threads() > 0; ++i) std::this_thread::sleep_for(100ms);
  EXPECT_EQ(server->client_threads(), 0) << "threads of clients that left were not joined";

  std::vector<net::Socket> silent;
  for (int i = 0; i < TcpStoreServer::kMaxGreeting + 20; ++i) {
    absl::StatusOr<net::Socket> raw = net::Connect("127.0.0.1", server->port(), net::After(5s));
    ASSERT_TRUE(raw.ok());
    silent.push_back(*std::move(raw));
  }
  for (int i = 0; i < 50 && server->client_threads() > TcpStoreServer::kMaxGreeting; ++i) {
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_LE(server->client_threads(), TcpStoreServer::kMaxGreeting);
  // The last ones were refused: closed by the store without a word.
  uint8_t byte;
  EXPECT_FALSE(net::RecvAll(silent.back(), &byte, 1, net::After(5s), "store").ok());
  silent.clear();
  for (int i = 0; i < 50 && server->client_threads() > 0; ++i) std::this_thread::sleep_for(100ms);
  auto client = Join(*server, 0);
  ASSERT_TRUE(client->Set("after", "silence").ok());
  EXPECT_EQ(*client->Get("after", 1s), "silence");
}

// ReservePort's promise to the multi-node tests: the port is kept from
// anyone asking for a free one, yet our Listen can take it over.
TEST(TcpStoreTest, ReservedPortCanBeServed) {
  absl::StatusOr<net::Socket> reserved = net::ReservePort();
  ASSERT_TRUE(reserved.ok()) << reserved.status();
  const int port = *net::LocalPort(*reserved);
  absl::StatusOr<std::unique_ptr<TcpStoreServer>> server = TcpStoreServer::Start("0.0.0.0", port, kToken);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = Join(**server, 0);
  ASSERT_TRUE(client->Set("k", "v").ok());
  EXPECT_EQ(*client->Get("k", 1s), "v");
}

TEST(TcpStoreTest, BusyPortIsAClearError) {
  auto server = StartServer();
  absl::StatusOr<std::unique_ptr<TcpStoreServer>> second = TcpStoreServer::Start("127.0.0.1", server->port(), kToken);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(), HasSubstr(absl::StrCat("port ", server->port())));
  EXPECT_THAT(second.status().message(), HasSubstr("already in use"));
}

TEST(TcpStoreTest, ServerShutdownMidRequestFailsTheClient) {
  auto server = StartServer();
  auto client = Join(*server, 0);
  std::thread killer([&] {
    // Mid-request: once the Get is blocked in the server.
    for (int i = 0; i < 3000 && server->waiting() < 1; ++i) std::this_thread::sleep_for(10ms);
    EXPECT_EQ(server->waiting(), 1);
    server.reset();
  });
  const auto start = net::Clock::now();
  absl::StatusOr<std::string> v = client->Get("never", 30s);
  killer.join();
  EXPECT_FALSE(v.ok());
  EXPECT_LT(net::Clock::now() - start, 10s);
}

TEST(TcpStoreTest, NobodyListeningTimesOut) {
  absl::StatusOr<net::Socket> reserved = net::ReservePort();  // Bound, refusing connections.
  ASSERT_TRUE(reserved.ok()) << reserved.status();
  absl::StatusOr<std::unique_ptr<TcpStoreClient>> client =
      TcpStoreClient::Connect("127.0.0.1", *net::LocalPort(*reserved), kToken, 1, net::After(300ms));
  EXPECT_EQ(client.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(client.status().message(), HasSubstr("could not connect"));
}

}  // namespace
}  // namespace llama
