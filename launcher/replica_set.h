// launcher serve --data_parallel_size=N: N replicas of the server, each a
// complete set of ranks with its own rendezvous store, token, logs and
// share of the CPUs or GPUs, behind one ServeFrontEnd on --port.
//
// Across nodes each node's launcher runs its share of the replicas, and the
// front end runs on node 0.
//
// A replica whose rank fails is a service's problem, not the job's end: its
// ranks are stopped (the supervisor's fail-fast, within the replica), the
// front end stops routing to it at once, and it is started again while the
// others serve, up to --max_restarts times: after 1 s when it had served
// (a killed rank, a lost GPU), after a back-off doubling to 30 s while its
// starts fail before serving (a fault that a restart does not cure). The launcher ends on SIGINT / SIGTERM (every
// replica drains), or with an error once no replica is left.

#ifndef LLAMA_LAUNCHER_REPLICA_SET_H_
#define LLAMA_LAUNCHER_REPLICA_SET_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/net.h"
#include "launcher/replica_directory.h"
#include "launcher/supervisor.h"

namespace llama {

// One start of a replica: its ranks, and its rendezvous store's socket,
// held until they have started (rank 0 inherits it).
struct ReplicaStart {
  std::vector<WorkerLaunch> launches;
  net::Socket store;
};

struct ReplicaSetOptions {
  int replicas = 1;  // On this node.
  int first_index = 0;  // This node's first replica's index among all nodes'.
  // The address the other nodes reach this node's replicas at (they serve
  // on it); 127.0.0.1 on one node.
  std::string host = "127.0.0.1";
  int max_restarts = 3;
  std::chrono::milliseconds first_backoff{1000};
  std::chrono::milliseconds max_backoff{30000};
  // log_dir: the job's; start k of replica i logs to <log_dir>/replica<i>-start<k>.
  SupervisorOptions supervise;
  // For the line that says the server is ready: "serving <model> on <url>
  // (<about>)", on the node of the front end (url set).
  std::string model, url, about;
  // Set (node 0 unreachable from another node): stop as on a signal.
  const std::atomic<bool>* stop_when = nullptr;
  // Node 0 across nodes: when its own replicas are past --max_restarts, the
  // front end still routes to the other nodes' until a signal.
  bool wait_for_signal = false;
};

// `start(replica)` gives a start of this node's replica `replica` (0 to
// replicas - 1): its ranks, serving on `host` at any free port (rank 0 says
// which on its "serving" progress line).
using ReplicaStarter = std::function<absl::StatusOr<ReplicaStart>(int replica)>;

// Runs this node's replicas, telling `directory` where each serves, until a
// signal (`on_signal` runs at the first; OK once they have drained) or
// until none is left (the last failure).
absl::Status RunReplicaSet(ReplicaDirectory& directory, const ReplicaSetOptions& options, const ReplicaStarter& start,
                           const std::function<void()>& on_signal);

// The port in a worker's "serving <model> on http://<host>:<port>/v1 ..."
// progress line, or -1.
int ServingPort(absl::string_view progress_line);

}  // namespace llama

#endif  // LLAMA_LAUNCHER_REPLICA_SET_H_
