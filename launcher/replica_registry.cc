#include "launcher/replica_registry.h"

#include <signal.h>
#include <unistd.h>

#include <map>
#include <utility>

#include <glog/logging.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace llama {

namespace {

constexpr char kDown[] = "down";
constexpr char kHeartbeatKey[] = "replicas/heartbeat";

}  // namespace

std::string ReplicaKey(int replica) { return absl::StrCat("replica/", replica); }

absl::StatusOr<std::unique_ptr<ReplicaPublisher>> ReplicaPublisher::Connect(const std::string& host, int port,
                                                                            const std::string& token, int node_rank,
                                                                            net::Deadline deadline) {
  ASSIGN_OR_RETURN(std::unique_ptr<TcpStoreClient> store,
                   TcpStoreClient::Connect(host, port, token, node_rank, deadline));
  return std::unique_ptr<ReplicaPublisher>(new ReplicaPublisher(std::move(store)));
}

ReplicaPublisher::ReplicaPublisher(std::unique_ptr<TcpStoreClient> store)
    : store_(std::move(store)), heartbeat_([this] { Heartbeat(); }) {}

ReplicaPublisher::~ReplicaPublisher() {
  stop_.Notify();
  heartbeat_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  store_->Close().IgnoreError();  // Node 0 may be gone already.
}

void ReplicaPublisher::ReplicaReady(int replica, const std::string& host, int port) {
  Publish(replica, absl::StrCat(host, ":", port));
}

void ReplicaPublisher::ReplicaDown(int replica) { Publish(replica, kDown); }

void ReplicaPublisher::Publish(int replica, const std::string& value) {
  if (lost_) return;  // Node 0 is gone: this node is stopping.
  std::lock_guard<std::mutex> lock(mutex_);
  if (absl::Status set = store_->Set(ReplicaKey(replica), value); !set.ok()) {
    LOG(ERROR) << "replica " << replica << ": cannot tell node 0 (" << value << "): " << set;
  }
}

void ReplicaPublisher::Heartbeat() {
  while (!stop_.WaitForNotificationWithTimeout(absl::Seconds(1))) {
    absl::Status alive;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      alive = store_->Check(kHeartbeatKey, std::chrono::seconds(10)).status();
    }
    if (!alive.ok() && !lost_.exchange(true)) {
      LOG(ERROR) << "node 0's replica registry is gone (" << alive << "): nothing routes here any more; stopping";
      ::kill(getpid(), SIGTERM);
    }
  }
}

absl::StatusOr<std::unique_ptr<ReplicaRegistry>> ReplicaRegistry::Start(net::Socket listener, const std::string& token,
                                                                         const std::string& connect_host,
                                                                         std::vector<int> remote,
                                                                         ReplicaDirectory& front,
                                                                         absl::Duration interval) {
  ASSIGN_OR_RETURN(const int port, net::LocalPort(listener));
  ASSIGN_OR_RETURN(std::unique_ptr<TcpStoreServer> server, TcpStoreServer::Start(std::move(listener), token));
  ASSIGN_OR_RETURN(std::unique_ptr<TcpStoreClient> reader,
                   TcpStoreClient::Connect(connect_host, port, token, /*rank=*/0, net::After(std::chrono::seconds(30))));
  return std::unique_ptr<ReplicaRegistry>(
      new ReplicaRegistry(std::move(server), std::move(reader), std::move(remote), front, interval));
}

ReplicaRegistry::ReplicaRegistry(std::unique_ptr<TcpStoreServer> server, std::unique_ptr<TcpStoreClient> reader,
                                 std::vector<int> remote, ReplicaDirectory& front, absl::Duration interval)
    : server_(std::move(server)),
      reader_(std::move(reader)),
      remote_(std::move(remote)),
      front_(front),
      interval_(interval),
      watcher_([this] { Watch(); }) {}

ReplicaRegistry::~ReplicaRegistry() {
  stop_.Notify();
  watcher_.join();
  reader_->Close().IgnoreError();
}

void ReplicaRegistry::Watch() {
  std::map<int, std::string> seen;
  do {
    for (int replica : remote_) {
      const std::string key = ReplicaKey(replica);
      absl::StatusOr<bool> present = reader_->Check(key);
      if (!present.ok() || !*present) continue;
      absl::StatusOr<std::string> value = reader_->Get(key, std::chrono::milliseconds(0));
      if (!value.ok() || seen[replica] == *value) continue;
      seen[replica] = *value;
      const size_t colon = value->rfind(':');
      int port = 0;
      if (*value == kDown || colon == std::string::npos ||
          !absl::SimpleAtoi(absl::string_view(*value).substr(colon + 1), &port)) {
        front_.ReplicaDown(replica);
      } else {
        front_.ReplicaReady(replica, value->substr(0, colon), port);
      }
    }
  } while (!stop_.WaitForNotificationWithTimeout(interval_));
}

}  // namespace llama
