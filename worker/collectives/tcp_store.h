// The rendezvous key-value store: rank 0 hosts a server, every rank joins
// it at MASTER_ADDR:MASTER_PORT, and ranks exchange what they must agree
// on (addresses, the NCCL id, model fingerprints) through it.
//
// Wire protocol (little-endian; every length capped before allocation):
//   hello    client: u32 magic 0x4B53324C, u32 version, u32 rank, string token
//            server: u8 0 ok | 1 bad magic or version | 2 wrong token (then closes)
//   request  u8 op, string key (<= 4 KiB), then
//              kSet   string value (<= 64 MiB)   -> u8 0
//              kGet   u32 timeout_ms             -> u8 0, string value | u8 1 (timed out)
//              kAdd   u64 delta (two's complement) -> u8 0, u64 new value
//              kCheck                            -> u8 0 absent | 1 present
//              kBye                              -> (server closes; the rank left cleanly)
//   string   u32 length, bytes
// A malformed frame closes that connection only. A client that disconnects
// without kBye is recorded under the key "lost/<rank>" (value: 1 for the
// first rank lost, 2 for the next...), so peers waiting on it fail fast
// instead of waiting for their deadline.

#ifndef LLAMA_WORKER_COLLECTIVES_TCP_STORE_H_
#define LLAMA_WORKER_COLLECTIVES_TCP_STORE_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "base/net.h"

namespace llama {

// Thread-safe; serves each client on its own thread, joined when the
// client leaves. At most kMaxClients connections at once, of which at most
// kMaxGreeting still owe their hello (kHelloTimeout): more are closed at
// once, so connections without a token cannot pile up threads. Destruction
// stops it and disconnects every client.
class TcpStoreServer {
 public:
  // Binds host:port (port 0: any free port). A busy port is an error naming it.
  static absl::StatusOr<std::unique_ptr<TcpStoreServer>> Start(const std::string& host, int port,
                                                               std::string token);
  // Serves on a socket already listening (see net::AdoptListener).
  static absl::StatusOr<std::unique_ptr<TcpStoreServer>> Start(net::Socket listener, std::string token);
  ~TcpStoreServer();

  static constexpr int kMaxClients = 4096;
  static constexpr int kMaxGreeting = 256;
  static constexpr std::chrono::seconds kHelloTimeout{10};

  int port() const { return port_; }
  // How many Gets are blocked now on a key not yet set (what a stuck job
  // waits for; the tests use it to know waiters are really waiting).
  int waiting();
  // Client threads alive now (the tests check they are joined).
  int client_threads();

 private:
  TcpStoreServer(net::Socket listener, int port, std::string token);
  struct Client {
    std::shared_ptr<net::Socket> socket;
    std::thread thread;
  };
  void AcceptLoop();
  // Joins the threads of clients that left. Holds mutex_.
  void ReapClients();
  void Serve(uint64_t id, std::shared_ptr<net::Socket> client);
  // Handles one request; false closes the connection.
  bool HandleRequest(const net::Socket& client, const std::string& peer, bool* said_bye);
  // The requests' bodies and answers, after the op and key; false closes
  // the connection.
  bool ServeSet(const net::Socket& client, const std::string& key, net::Deadline deadline, const std::string& peer);
  bool ServeGet(const net::Socket& client, const std::string& key, net::Deadline deadline, const std::string& peer);
  bool ServeAdd(const net::Socket& client, const std::string& key, net::Deadline deadline, const std::string& peer);
  bool ServeCheck(const net::Socket& client, const std::string& key, net::Deadline deadline,
                  const std::string& peer);

  net::Socket listener_;
  int port_;
  std::string token_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> data_;
  bool stopping_ = false;
  int lost_count_ = 0;
  int waiting_ = 0;
  int greeting_ = 0;
  uint64_t next_client_ = 0;
  std::map<uint64_t, Client> clients_;
  std::vector<uint64_t> left_;  // Clients whose thread has ended, to join.
  std::thread accept_thread_;
};

// One connection to the store. Use from one thread at a time.
class TcpStoreClient {
 public:
  // How long a request may take to send and answer (beyond a Get's wait).
  static constexpr std::chrono::seconds kIoTimeout{30};

  // Connects (retrying until `deadline`) and says hello as `rank`.
  static absl::StatusOr<std::unique_ptr<TcpStoreClient>> Connect(const std::string& host, int port,
                                                                 const std::string& token, int rank,
                                                                 net::Deadline deadline);
  ~TcpStoreClient();

  absl::Status Set(const std::string& key, const std::string& value);
  // Waits up to `timeout` for `key` to be set; DeadlineExceeded names the
  // key and leaves the connection usable. `io_timeout` bounds the exchange
  // on top of that: a store host that is frozen (not gone) answers nothing,
  // and a caller reporting another failure must not wait long for it.
  absl::StatusOr<std::string> Get(const std::string& key, std::chrono::milliseconds timeout,
                                  std::chrono::milliseconds io_timeout = kIoTimeout);
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta);
  absl::StatusOr<bool> Check(const std::string& key, std::chrono::milliseconds io_timeout = kIoTimeout);
  // Leaves cleanly (the server will not report this rank lost). Idempotent.
  absl::Status Close();

  // The local interface address the store is reached through.
  absl::StatusOr<std::string> LocalAddress() const { return net::LocalAddress(socket_); }

 private:
  TcpStoreClient(net::Socket socket, std::string peer) : socket_(std::move(socket)), peer_(std::move(peer)) {}
  absl::Status SendRequest(uint8_t op, const std::string& key, net::Deadline deadline);
  // `status`, closing the connection first if it failed.
  absl::Status Dropped(absl::Status status);

  net::Socket socket_;
  std::string peer_;
};

}  // namespace llama

#endif  // LLAMA_WORKER_COLLECTIVES_TCP_STORE_H_
