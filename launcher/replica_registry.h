// Replicas across nodes (launcher serve --data_parallel_size with --nnodes
// or under Slurm): node 0's launcher hosts a store (the rendezvous store's
// protocol, worker/collectives/tcp_store.h, on --master_port with the job's
// token), the other nodes' launchers publish there where each of their
// replicas serves ("replica/<i>": "<host>:<port>", or "down"), and node 0
// tells its front end what they published.

#ifndef LLAMA_LAUNCHER_REPLICA_REGISTRY_H_
#define LLAMA_LAUNCHER_REPLICA_REGISTRY_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "base/net.h"
#include "launcher/replica_directory.h"
#include "worker/collectives/tcp_store.h"

namespace llama {

// The other nodes' directory: what their replicas do, published to node 0.
// A node that can no longer reach node 0's store for kLostAfter (its
// launcher is gone) says so through lost(): the replica set then stops its
// replicas (they drain), as nothing routes to them.
class ReplicaPublisher : public ReplicaDirectory {
 public:
  static constexpr absl::Duration kLostAfter = absl::Seconds(30);

  // Retries until `deadline` (node 0 may still be preparing its shards).
  static absl::StatusOr<std::unique_ptr<ReplicaPublisher>> Connect(const std::string& host, int port,
                                                                   const std::string& token, int node_rank,
                                                                   net::Deadline deadline);
  ~ReplicaPublisher() override;

  void ReplicaReady(int replica, const std::string& host, int port) override;
  void ReplicaDown(int replica) override;
  // Set once node 0 has been unreachable for kLostAfter.
  const std::atomic<bool>& lost() const { return lost_; }

 private:
  ReplicaPublisher(std::unique_ptr<TcpStoreClient> store, std::string host, int port, std::string token,
                   int node_rank);
  void Publish(int replica, const std::string& value);
  void Heartbeat();

  const std::string host_, token_;
  const int port_, node_rank_;
  std::mutex mutex_;  // The store client is used from one thread at a time.
  std::unique_ptr<TcpStoreClient> store_;  // Null while reconnecting.
  std::atomic<bool> lost_{false};
  absl::Notification stop_;
  std::thread heartbeat_;
};

// Node 0's side: hosts the store and reads, every `interval`, what the
// replicas `remote` (their indices) published, for `front`.
class ReplicaRegistry {
 public:
  static absl::StatusOr<std::unique_ptr<ReplicaRegistry>> Start(net::Socket listener, const std::string& token,
                                                                const std::string& connect_host,
                                                                std::vector<int> remote, ReplicaDirectory& front,
                                                                absl::Duration interval);
  ~ReplicaRegistry();

 private:
  ReplicaRegistry(std::unique_ptr<TcpStoreServer> server, std::unique_ptr<TcpStoreClient> reader,
                  std::string connect_host, std::string token, std::vector<int> remote, ReplicaDirectory& front,
                  absl::Duration interval);
  void Watch();

  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<TcpStoreClient> reader_;  // Reconnected if its connection breaks.
  const std::string connect_host_, token_;
  const std::vector<int> remote_;
  ReplicaDirectory& front_;
  const absl::Duration interval_;
  absl::Notification stop_;
  std::thread watcher_;
};

// "replica/<i>", the key replica i is published under.
std::string ReplicaKey(int replica);

}  // namespace llama

#endif  // LLAMA_LAUNCHER_REPLICA_REGISTRY_H_
