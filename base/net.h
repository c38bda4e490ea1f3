// Blocking TCP helpers with deadlines, shared by the rendezvous store and
// the TCP collective.
//
// Every call takes an absolute deadline; reads and writes loop until the
// whole buffer has moved, retry on EINTR, never raise SIGPIPE, and treat a
// zero-byte read as the peer having gone away.

#ifndef LLAMA_BASE_NET_H_
#define LLAMA_BASE_NET_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace llama::net {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

inline Deadline After(std::chrono::milliseconds timeout) { return Clock::now() + timeout; }

// Equal secrets (API keys, job tokens), compared in a time that depends on
// their lengths only (OpenSSL's CRYPTO_memcmp).
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

// An owned socket descriptor; closes on destruction.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { Close(); }
  Socket(Socket&& other) noexcept : fd_(other.release()) {}
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void Close();
  // Wakes any thread blocked on this socket (shutdown(2)) without closing it.
  void Shutdown();

 private:
  int fd_ = -1;
};

// Listens on `host`:`port` (port 0: any free port). A port in use is a
// FailedPrecondition that names it.
absl::StatusOr<Socket> Listen(const std::string& host, int port, int backlog = 128);

// The port a listening socket is bound to.
absl::StatusOr<int> LocalPort(const Socket& socket);
// Takes a listening socket bound elsewhere (handed down by the process that
// chose the port: binding port 0 and passing the socket on leaves no moment
// in which another program can take the port). A copy of `fd` is made, so
// the caller keeps its own. Errors say what `fd` is instead.
absl::StatusOr<Socket> AdoptListener(int fd);
// Holds a free port without listening on it, for a port several processes
// must agree on before any of them starts (the nodes of a multi-node job in
// a test): the kernel gives it to no one asking for any free port, nobody
// can connect to it, and Listen (SO_REUSEADDR) can still take it over. A
// picked port merely released could be taken by anyone in the meantime.
absl::StatusOr<Socket> ReservePort();
// The local address (IPv4 dotted) of a connected socket: the interface that
// reaches its peer.
absl::StatusOr<std::string> LocalAddress(const Socket& socket);

// The local IPv4 address (dotted) through which this machine reaches
// `host`: `host` itself when it is one of ours (loopback included). Sends
// nothing (a UDP socket's connect only picks the route). Where a server that
// peers reach through `host` should listen, and nowhere else.
absl::StatusOr<std::string> AddressReaching(const std::string& host);

// Accepts one connection, or DeadlineExceeded.
absl::StatusOr<Socket> Accept(const Socket& listener, Deadline deadline);

// Connects to host:port, retrying refused or unreachable attempts with
// backoff until `deadline`; the error says how long it tried.
absl::StatusOr<Socket> Connect(const std::string& host, int port, Deadline deadline);

// Moves exactly `size` bytes. `peer` names the other end in errors.
absl::Status SendAll(const Socket& socket, const void* data, size_t size, Deadline deadline,
                     const std::string& peer);
absl::Status RecvAll(const Socket& socket, void* data, size_t size, Deadline deadline, const std::string& peer);

// Sends `send` on one socket while receiving `recv` on another (or the same),
// so that two peers exchanging large buffers cannot deadlock on full kernel
// buffers.
absl::Status Exchange(const Socket& out, const void* send, size_t send_size, const Socket& in, void* recv,
                      size_t recv_size, Deadline deadline, const std::string& out_peer,
                      const std::string& in_peer);

// Little-endian integers and length-prefixed strings, with a cap on every
// length read off the wire.
absl::Status SendU32(const Socket& s, uint32_t v, Deadline d, const std::string& peer);
absl::StatusOr<uint32_t> RecvU32(const Socket& s, Deadline d, const std::string& peer);
absl::Status SendString(const Socket& s, const std::string& v, Deadline d, const std::string& peer);
absl::StatusOr<std::string> RecvString(const Socket& s, size_t max_size, Deadline d, const std::string& peer);

}  // namespace llama::net

#endif  // LLAMA_BASE_NET_H_
