#include "launcher/replica_registry.h"

#include <map>
#include <utility>

#include <glog/logging.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace llama {

namespace {

constexpr char kDown[] = "down";
// Read by the heartbeat's Check; never set.
constexpr char kHeartbeatKey[] = "replicas/heartbeat";

}  // namespace

std::string ReplicaKey(int replica) { return absl::StrCat("replica/", replica); }

absl::StatusOr<std::unique_ptr<ReplicaPublisher>> ReplicaPublisher::Connect(const std::string& host, int port,
                                                                            const std::string& token, int node_rank,
                                                                            net::Deadline deadline) {
  // Node 0 binds the port before it prepares its shards and answers once
  // it serves: a hello that times out is tried again until the deadline.
  while (true) {
    absl::StatusOr<std::unique_ptr<TcpStoreClient>> store =
        TcpStoreClient::Connect(host, port, token, node_rank, deadline);
    if (store.ok()) {
      return std::unique_ptr<ReplicaPublisher>(
          new ReplicaPublisher(*std::move(store), host, port, token, node_rank));
    }
    if (absl::IsPermissionDenied(store.status()) || net::Clock::now() >= deadline) {
      return Annotate(store.status(), "node 0's replica registry");
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

ReplicaPublisher::ReplicaPublisher(std::unique_ptr<TcpStoreClient> store, std::string host, int port,
                                   std::string token, int node_rank)
    : host_(std::move(host)),
      token_(std::move(token)),
      port_(port),
      node_rank_(node_rank),
      store_(std::move(store)),
      heartbeat_([this] { Heartbeat(); }) {}

ReplicaPublisher::~ReplicaPublisher() {
  stop_.Notify();
  heartbeat_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  if (store_ != nullptr) store_->Close().IgnoreError();  // Node 0 may be gone already.
}

void ReplicaPublisher::ReplicaReady(int replica, const std::string& host, int port) {
  Publish(replica, absl::StrCat(host, ":", port));
}

void ReplicaPublisher::ReplicaDown(int replica) { Publish(replica, kDown); }

void ReplicaPublisher::Publish(int replica, const std::string& value) {
  if (lost_) return;  // Node 0 is gone: this node is stopping.
  std::lock_guard<std::mutex> lock(mutex_);
  absl::Status set = store_ == nullptr ? absl::UnavailableError("reconnecting") : store_->Set(ReplicaKey(replica), value);
  if (!set.ok()) LOG(ERROR) << "replica " << replica << ": cannot tell node 0 (" << value << "): " << set;
}

// Every second a Check; a broken connection is made again. Unreachable for
// kLostAfter (not one slow answer): lost.
void ReplicaPublisher::Heartbeat() {
  absl::Time last_reached = absl::Now();
  while (!lost_ && !stop_.WaitForNotificationWithTimeout(absl::Seconds(1))) {
    absl::Status alive;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (store_ == nullptr) {
        absl::StatusOr<std::unique_ptr<TcpStoreClient>> again =
            TcpStoreClient::Connect(host_, port_, token_, node_rank_, net::After(std::chrono::seconds(5)));
        if (again.ok()) store_ = *std::move(again);
        alive = again.status();
      }
      if (store_ != nullptr) {
        alive = store_->Check(kHeartbeatKey, std::chrono::seconds(10)).status();
        if (!alive.ok()) store_.reset();
      }
    }
    if (alive.ok()) {
      last_reached = absl::Now();
    } else if (absl::Now() - last_reached >= kLostAfter) {
      LOG(ERROR) << "node 0's replica registry has been unreachable for " << kLostAfter << " (" << alive
                 << "): nothing routes here any more; stopping";
      lost_ = true;
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
  return std::unique_ptr<ReplicaRegistry>(new ReplicaRegistry(std::move(server), std::move(reader), connect_host,
                                                              token, std::move(remote), front, interval));
}

ReplicaRegistry::ReplicaRegistry(std::unique_ptr<TcpStoreServer> server, std::unique_ptr<TcpStoreClient> reader,
                                 std::string connect_host, std::string token, std::vector<int> remote,
                                 ReplicaDirectory& front, absl::Duration interval)
    : server_(std::move(server)),
      reader_(std::move(reader)),
      connect_host_(std::move(connect_host)),
      token_(std::move(token)),
      remote_(std::move(remote)),
      front_(front),
      interval_(interval),
      watcher_([this] { Watch(); }) {}

ReplicaRegistry::~ReplicaRegistry() {
  stop_.Notify();
  watcher_.join();
  if (reader_ != nullptr) reader_->Close().IgnoreError();
}

void ReplicaRegistry::Watch() {
  std::map<int, std::string> seen;
  do {
    if (reader_ == nullptr) {  // Its connection broke: made again.
      absl::StatusOr<std::unique_ptr<TcpStoreClient>> again = TcpStoreClient::Connect(
          connect_host_, server_->port(), token_, /*rank=*/0, net::After(std::chrono::seconds(5)));
      if (!again.ok()) {
        LOG(ERROR) << "the replica registry cannot be read: " << again.status();
        continue;
      }
      reader_ = *std::move(again);
    }
    for (int replica : remote_) {
      const std::string key = ReplicaKey(replica);
      absl::StatusOr<bool> present = reader_->Check(key);
      if (!present.ok()) {
        LOG(ERROR) << "the replica registry cannot be read: " << present.status();
        reader_.reset();
        break;
      }
      if (!*present) continue;
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
