// How the ranks of a job find each other and agree before computing:
//
//   join   rank 0 starts the store at MASTER_ADDR:MASTER_PORT; every rank
//          connects and registers; all wait for all (--rendezvous_timeout).
//   load   each rank loads its shard, then publishes a fingerprint of its
//          model config; all wait for all (--load_timeout, long: a 70B
//          shard can take minutes) and check the fingerprints agree.
//   finish every rank reports done; rank 0 keeps the store up until all have.
//
// Separate deadlines keep a slow loader from tripping the join timeout. A
// rank whose store connection drops is reported by the store, so peers
// fail at once instead of at their deadline.

#ifndef LLAMA_WORKER_COLLECTIVES_RENDEZVOUS_H_
#define LLAMA_WORKER_COLLECTIVES_RENDEZVOUS_H_

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "worker/collectives/environment.h"
#include "worker/collectives/tcp_store.h"

namespace llama {

struct RendezvousOptions {
  std::string master_addr = "127.0.0.1";
  int master_port = kDefaultMasterPort;  // Rank 0 of a job of one may say 0: any free port.
  int rank = 0;
  int world_size = 1;
  std::string token;
  // Rank 0 only, optional: a socket already listening on master_port (bound
  // by whoever chose the port, RENDEZVOUS_LISTEN_FD in a worker) to host the
  // store on, instead of binding the port itself. The caller keeps it.
  int listen_fd = -1;
  std::chrono::milliseconds join_timeout{std::chrono::minutes(5)};
  std::chrono::milliseconds load_timeout{std::chrono::minutes(30)};
};

class Rendezvous {
 public:
  // Rank 0 starts the store; every rank connects and waits for the others.
  static absl::StatusOr<std::unique_ptr<Rendezvous>> Join(const RendezvousOptions& options);
  ~Rendezvous();

  // Publishes this rank's model fingerprint and waits until every rank has
  // published the same one. Errors name the rank that differs.
  absl::Status AgreeOnModel(const std::string& fingerprint);

  // Waits until `prefix`<r> is set for every rank, failing early if a rank
  // is lost, and at the deadline with "k/n <what> after S s; missing: ...".
  absl::Status WaitForAll(const std::string& prefix, std::chrono::milliseconds timeout, const std::string& what);

  // Reports this rank done; rank 0 waits (bounded) for everyone before its
  // store goes away.
  absl::Status Finish();

  TcpStoreClient& store() { return *client_; }
  const RendezvousOptions& options() const { return options_; }

 private:
  Rendezvous(RendezvousOptions options, std::unique_ptr<TcpStoreServer> server,
             std::unique_ptr<TcpStoreClient> client)
      : options_(std::move(options)), server_(std::move(server)), client_(std::move(client)) {}

  RendezvousOptions options_;
  std::unique_ptr<TcpStoreServer> server_;  // Rank 0 only.
  std::unique_ptr<TcpStoreClient> client_;
};

}  // namespace llama

#endif  // LLAMA_WORKER_COLLECTIVES_RENDEZVOUS_H_
