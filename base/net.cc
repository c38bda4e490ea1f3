#include "base/net.h"

#include <openssl/crypto.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace llama::net {

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

namespace {

int MillisLeft(Deadline deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, 1 << 30));
}

absl::Status Errno(absl::string_view what, int error) {
  return absl::UnavailableError(absl::StrFormat("%s: %s", what, std::strerror(error)));
}

// Resolves host to an IPv4 address.
absl::StatusOr<sockaddr_in> Resolve(const std::string& host, int port) {
  addrinfo hints = {};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const int error = getaddrinfo(host.c_str(), nullptr, &hints, &result);
  if (error != 0 || result == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat("cannot resolve host \"%s\": %s", host, gai_strerror(error)));
  }
  sockaddr_in address = *reinterpret_cast<sockaddr_in*>(result->ai_addr);
  freeaddrinfo(result);
  address.sin_port = htons(static_cast<uint16_t>(port));
  return address;
}

void SetNoDelay(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = other.release();
  }
  return *this;
}

void Socket::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void Socket::Shutdown() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

absl::StatusOr<Socket> Listen(const std::string& host, int port, int backlog) {
  ASSIGN_OR_RETURN(sockaddr_in address, Resolve(host, port));
  Socket socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!socket.valid()) return Errno("socket", errno);
  const int one = 1;
  setsockopt(socket.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(socket.fd(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    const int error = errno;
    if (error == EADDRINUSE) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "port %d on %s is already in use (another job or program holds it); choose another --master_port",
          port, host));
    }
    return Errno(absl::StrFormat("bind %s:%d", host, port), error);
  }
  if (::listen(socket.fd(), backlog) != 0) return Errno("listen", errno);
  return socket;
}

absl::StatusOr<int> LocalPort(const Socket& socket) {
  sockaddr_in address = {};
  socklen_t length = sizeof address;
  if (getsockname(socket.fd(), reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return Errno("getsockname", errno);
  }
  return ntohs(address.sin_port);
}

absl::StatusOr<Socket> AdoptListener(int fd) {
  Socket socket(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  if (!socket.valid()) return Errno(absl::StrFormat("descriptor %d", fd), errno);
  int listening = 0;
  socklen_t length = sizeof listening;
  if (getsockopt(socket.fd(), SOL_SOCKET, SO_ACCEPTCONN, &listening, &length) != 0 || listening == 0) {
    return absl::InvalidArgumentError(absl::StrFormat("descriptor %d is not a listening socket", fd));
  }
  return socket;
}

absl::StatusOr<Socket> ReservePort() {
  ASSIGN_OR_RETURN(const sockaddr_in address, Resolve("0.0.0.0", 0));
  Socket socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!socket.valid()) return Errno("socket", errno);
  const int one = 1;
  setsockopt(socket.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(socket.fd(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    return Errno("bind 0.0.0.0:0", errno);
  }
  return socket;
}

absl::StatusOr<std::string> LocalAddress(const Socket& socket) {
  sockaddr_in address = {};
  socklen_t length = sizeof address;
  if (getsockname(socket.fd(), reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return Errno("getsockname", errno);
  }
  char text[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &address.sin_addr, text, sizeof text);
  return std::string(text);
}

absl::StatusOr<std::string> AddressReaching(const std::string& host) {
  ASSIGN_OR_RETURN(sockaddr_in peer, Resolve(host, 9));  // Any port: nothing is sent.
  Socket probe(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!probe.valid()) return Errno("socket", errno);
  if (::connect(probe.fd(), reinterpret_cast<sockaddr*>(&peer), sizeof peer) != 0) {
    return Errno(absl::StrFormat("no route to \"%s\"", host), errno);
  }
  return LocalAddress(probe);
}

absl::StatusOr<Socket> Accept(const Socket& listener, Deadline deadline) {
  while (true) {
    pollfd p = {listener.fd(), POLLIN, 0};
    const int ready = ::poll(&p, 1, MillisLeft(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return Errno("poll", errno);
    if (ready == 0) return absl::DeadlineExceededError("timed out waiting for a connection");
    if (p.revents & (POLLERR | POLLNVAL)) return absl::CancelledError("listening socket closed");
    const int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) continue;
      return Errno("accept", errno);
    }
    SetNoDelay(fd);
    return Socket(fd);
  }
}

absl::StatusOr<Socket> Connect(const std::string& host, int port, Deadline deadline) {
  const auto start = Clock::now();
  ASSIGN_OR_RETURN(sockaddr_in address, Resolve(host, port));
  std::chrono::milliseconds backoff(20);
  std::string last_error;
  while (true) {
    Socket socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!socket.valid()) return Errno("socket", errno);
    if (::connect(socket.fd(), reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) {
      SetNoDelay(socket.fd());
      return socket;
    }
    last_error = std::strerror(errno);
    if (Clock::now() + backoff >= deadline) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "could not connect to %s:%d for %.0f s (last error: %s)", host, port,
          std::chrono::duration<double>(Clock::now() - start).count(), last_error));
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
}

absl::Status Exchange(const Socket& out, const void* send, size_t send_size, const Socket& in, void* recv,
                      size_t recv_size, Deadline deadline, const std::string& out_peer,
                      const std::string& in_peer) {
  const char* s = static_cast<const char*>(send);
  char* r = static_cast<char*>(recv);
  size_t sent = 0, received = 0;
  while (sent < send_size || received < recv_size) {
    pollfd fds[2];
    int n = 0, send_index = -1, recv_index = -1;
    if (sent < send_size) {
      send_index = n;
      fds[n++] = {out.fd(), POLLOUT, 0};
    }
    if (received < recv_size) {
      if (send_index >= 0 && out.fd() == in.fd()) {
        fds[send_index].events |= POLLIN;
        recv_index = send_index;
      } else {
        recv_index = n;
        fds[n++] = {in.fd(), POLLIN, 0};
      }
    }
    const int ready = ::poll(fds, n, MillisLeft(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return Errno("poll", errno);
    if (ready == 0) {
      const std::string& who = received < recv_size ? in_peer : out_peer;
      return absl::DeadlineExceededError(absl::StrFormat(
          "timed out waiting for %s (%d of %d bytes received, %d of %d sent); is it alive?", who, received,
          recv_size, sent, send_size));
    }
    if (recv_index >= 0 && (fds[recv_index].revents & (POLLIN | POLLHUP | POLLERR))) {
      const ssize_t got = ::recv(in.fd(), r + received, recv_size - received, MSG_DONTWAIT);
      if (got == 0) return absl::UnavailableError(absl::StrFormat("connection to %s closed (the process exited?)", in_peer));
      if (got < 0 && errno != EAGAIN && errno != EINTR) {
        return absl::UnavailableError(absl::StrFormat("connection to %s lost: %s", in_peer, std::strerror(errno)));
      }
      if (got > 0) received += got;
    }
    if (send_index >= 0 && (fds[send_index].revents & (POLLOUT | POLLHUP | POLLERR))) {
      const ssize_t put = ::send(out.fd(), s + sent, send_size - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (put < 0 && errno != EAGAIN && errno != EINTR) {
        return absl::UnavailableError(absl::StrFormat("connection to %s lost: %s", out_peer, std::strerror(errno)));
      }
      if (put > 0) sent += put;
    }
  }
  return absl::OkStatus();
}

absl::Status SendAll(const Socket& socket, const void* data, size_t size, Deadline deadline,
                     const std::string& peer) {
  return Exchange(socket, data, size, socket, nullptr, 0, deadline, peer, peer);
}

absl::Status RecvAll(const Socket& socket, void* data, size_t size, Deadline deadline, const std::string& peer) {
  return Exchange(socket, nullptr, 0, socket, data, size, deadline, peer, peer);
}

absl::Status SendU32(const Socket& s, uint32_t v, Deadline d, const std::string& peer) {
  uint8_t bytes[4];
  for (int i = 0; i < 4; ++i) bytes[i] = static_cast<uint8_t>(v >> (8 * i));
  return SendAll(s, bytes, 4, d, peer);
}

absl::StatusOr<uint32_t> RecvU32(const Socket& s, Deadline d, const std::string& peer) {
  uint8_t bytes[4];
  RETURN_IF_ERROR(RecvAll(s, bytes, 4, d, peer));
  return static_cast<uint32_t>(bytes[0]) | static_cast<uint32_t>(bytes[1]) << 8 |
         static_cast<uint32_t>(bytes[2]) << 16 | static_cast<uint32_t>(bytes[3]) << 24;
}

absl::Status SendString(const Socket& s, const std::string& v, Deadline d, const std::string& peer) {
  RETURN_IF_ERROR(SendU32(s, static_cast<uint32_t>(v.size()), d, peer));
  return SendAll(s, v.data(), v.size(), d, peer);
}

absl::StatusOr<std::string> RecvString(const Socket& s, size_t max_size, Deadline d, const std::string& peer) {
  ASSIGN_OR_RETURN(uint32_t size, RecvU32(s, d, peer));
  if (size > max_size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s sent a %d-byte field; at most %d allowed", peer, size, max_size));
  }
  std::string v(size, '\0');
  RETURN_IF_ERROR(RecvAll(s, v.data(), v.size(), d, peer));
  return v;
}

}  // namespace llama::net
