#include "launcher/replica_registry.h"

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace llama {
namespace {

using namespace std::chrono_literals;

// What the front end would be told.
class RecordingDirectory : public ReplicaDirectory {
 public:
  void ReplicaReady(int replica, const std::string& host, int port) override {
    std::lock_guard<std::mutex> lock(mutex_);
    state_[replica] = host + ":" + std::to_string(port);
  }
  void ReplicaDown(int replica) override {
    std::lock_guard<std::mutex> lock(mutex_);
    state_[replica] = "down";
  }
  // Waits up to 5 s for `replica` to be `want`.
  bool Becomes(int replica, const std::string& want) {
    for (int i = 0; i < 500; ++i) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (state_[replica] == want) return true;
      }
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }
  size_t told() {
    std::lock_guard<std::mutex> lock(mutex_);
    return state_.size();
  }

 private:
  std::mutex mutex_;
  std::map<int, std::string> state_;
};

TEST(ReplicaRegistryTest, OtherNodesReplicasReachTheFrontEnd) {
  absl::StatusOr<net::Socket> listener = net::Listen("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok()) << listener.status();
  const int port = *net::LocalPort(*listener);
  RecordingDirectory front;
  absl::StatusOr<std::unique_ptr<ReplicaRegistry>> registry =
      ReplicaRegistry::Start(*std::move(listener), "token", "127.0.0.1", {2, 3}, front, absl::Milliseconds(20));
  ASSERT_TRUE(registry.ok()) << registry.status();

  // A wrong token is turned away.
  EXPECT_FALSE(ReplicaPublisher::Connect("127.0.0.1", port, "wrong", 1, net::After(2s)).ok());

  absl::StatusOr<std::unique_ptr<ReplicaPublisher>> node1 =
      ReplicaPublisher::Connect("127.0.0.1", port, "token", 1, net::After(10s));
  ASSERT_TRUE(node1.ok()) << node1.status();
  (*node1)->ReplicaReady(2, "10.0.0.7", 41000);
  (*node1)->ReplicaReady(3, "10.0.0.7", 41001);
  EXPECT_TRUE(front.Becomes(2, "10.0.0.7:41000"));
  EXPECT_TRUE(front.Becomes(3, "10.0.0.7:41001"));
  (*node1)->ReplicaDown(3);
  EXPECT_TRUE(front.Becomes(3, "down"));
  (*node1)->ReplicaReady(3, "10.0.0.7", 41500);  // Restarted on another port.
  EXPECT_TRUE(front.Becomes(3, "10.0.0.7:41500"));
  // Only the replicas it watches reach the front end.
  (*node1)->ReplicaReady(0, "10.0.0.7", 1);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(front.told(), 2u);
  node1->reset();  // Before the registry: its heartbeat would find node 0 gone.
}

}  // namespace
}  // namespace llama
