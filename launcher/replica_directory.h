// Where a replica of a data-parallel server (launcher serve
// --data_parallel_size) is said to serve, or to have stopped: the front end
// on node 0 (launcher/serve_front_end.h), or, on the other nodes, node 0's
// registry (launcher/replica_registry.h), which the front end reads.

#ifndef LLAMA_LAUNCHER_REPLICA_DIRECTORY_H_
#define LLAMA_LAUNCHER_REPLICA_DIRECTORY_H_

#include <string>

namespace llama {

class ReplicaDirectory {
 public:
  virtual ~ReplicaDirectory() = default;
  // `replica` (its index among all nodes') serves at host:port: a fresh
  // start, routed to once its /health says ok.
  virtual void ReplicaReady(int replica, const std::string& host, int port) = 0;
  // `replica`'s ranks have failed or exited: routed nothing more.
  virtual void ReplicaDown(int replica) = 0;
};

}  // namespace llama

#endif  // LLAMA_LAUNCHER_REPLICA_DIRECTORY_H_
