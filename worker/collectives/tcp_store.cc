#include "worker/collectives/tcp_store.h"

#include <glog/logging.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace llama {
namespace {

constexpr uint32_t kMagic = 0x4B53324C;
constexpr uint32_t kVersion = 1;
constexpr size_t kMaxKey = 4096;
constexpr size_t kMaxValue = 64 << 20;
constexpr size_t kMaxToken = 1024;
// Per-message network deadline, on top of any waiting the request asks for.
constexpr std::chrono::seconds kIoTimeout = TcpStoreClient::kIoTimeout;
// An idle client may stay connected for the whole job.
constexpr std::chrono::hours kIdle(24 * 365);

constexpr std::chrono::milliseconds kGetSlice(200);

// The client closed its end (or its connection failed): a client waiting
// for an answer sends nothing, so readable means gone.
bool PeerClosed(const net::Socket& s) {
  char byte;
  const ssize_t n = ::recv(s.fd(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

enum Op : uint8_t { kSet = 1, kGet = 2, kAdd = 3, kCheck = 4, kBye = 5 };

absl::Status SendU64(const net::Socket& s, uint64_t v, net::Deadline d, const std::string& peer) {
  uint8_t bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(v >> (8 * i));
  return net::SendAll(s, bytes, 8, d, peer);
}

absl::StatusOr<uint64_t> RecvU64(const net::Socket& s, net::Deadline d, const std::string& peer) {
  uint8_t bytes[8];
  RETURN_IF_ERROR(net::RecvAll(s, bytes, 8, d, peer));
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(bytes[i]) << (8 * i);
  return v;
}

absl::Status SendByte(const net::Socket& s, uint8_t b, net::Deadline d, const std::string& peer) {
  return net::SendAll(s, &b, 1, d, peer);
}

absl::StatusOr<uint8_t> RecvByte(const net::Socket& s, net::Deadline d, const std::string& peer) {
  uint8_t b;
  RETURN_IF_ERROR(net::RecvAll(s, &b, 1, d, peer));
  return b;
}

}  // namespace

// ---- Server

TcpStoreServer::TcpStoreServer(net::Socket listener, int port, std::string token)
    : listener_(std::move(listener)), port_(port), token_(std::move(token)) {
  accept_thread_ = std::thread([this] { AcceptLoop(); });
}

absl::StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(const std::string& host, int port,
                                                                      std::string token) {
  ASSIGN_OR_RETURN(net::Socket listener, net::Listen(host, port));
  return Start(std::move(listener), std::move(token));
}

absl::StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(net::Socket listener, std::string token) {
  ASSIGN_OR_RETURN(const int bound, net::LocalPort(listener));
  return std::unique_ptr<TcpStoreServer>(new TcpStoreServer(std::move(listener), bound, std::move(token)));
}

int TcpStoreServer::waiting() {
  std::lock_guard<std::mutex> lock(mutex_);
  return waiting_;
}

int TcpStoreServer::client_threads() {
  std::lock_guard<std::mutex> lock(mutex_);
  ReapClients();
  return static_cast<int>(clients_.size());
}

TcpStoreServer::~TcpStoreServer() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    for (auto& [id, client] : clients_) client.socket->Shutdown();
  }
  changed_.notify_all();
  listener_.Shutdown();
  accept_thread_.join();
  // No new client can come; each thread ends once its socket is shut.
  for (auto& [id, client] : clients_) client.thread.join();
}

void TcpStoreServer::ReapClients() {
  for (uint64_t id : left_) {
    auto it = clients_.find(id);
    it->second.thread.join();  // Ended already: its last act was to list itself.
    clients_.erase(it);
  }
  left_.clear();
}

void TcpStoreServer::AcceptLoop() {
  while (true) {
    absl::StatusOr<net::Socket> client = net::Accept(listener_, net::After(std::chrono::milliseconds(200)));
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    ReapClients();
    if (!client.ok()) continue;  // Timeout: check stopping_ again.
    if (static_cast<int>(clients_.size()) >= kMaxClients || greeting_ >= kMaxGreeting) {
      LOG_EVERY_N(WARNING, 100) << "rendezvous store: " << clients_.size() << " connections, " << greeting_
                                << " of them without a hello yet; refused one";
      continue;  // Closed as it goes out of scope.
    }
    ++greeting_;
    const uint64_t id = next_client_++;
    auto shared = std::make_shared<net::Socket>(*std::move(client));
    clients_[id] = {shared, std::thread([this, id, shared] { Serve(id, shared); })};
  }
}

void TcpStoreServer::Serve(uint64_t id, std::shared_ptr<net::Socket> client) {
  // Whichever way it ends, the thread lists itself to be joined.
  struct Leave {
    TcpStoreServer* server;
    uint64_t id;
    ~Leave() {
      std::lock_guard<std::mutex> lock(server->mutex_);
      server->left_.push_back(id);
    }
  } leave{this, id};
  std::string peer = "a store client";
  const net::Deadline hello_deadline = net::After(kHelloTimeout);
  absl::StatusOr<uint32_t> magic = net::RecvU32(*client, hello_deadline, peer);
  absl::StatusOr<uint32_t> version = magic.ok() ? net::RecvU32(*client, hello_deadline, peer) : magic;
  absl::StatusOr<uint32_t> rank = version.ok() ? net::RecvU32(*client, hello_deadline, peer) : version;
  absl::StatusOr<std::string> token =
      rank.ok() ? net::RecvString(*client, kMaxToken, hello_deadline, peer) : rank.status();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    --greeting_;
  }
  const auto close = [&] {
    std::lock_guard<std::mutex> lock(mutex_);
    client->Close();
  };
  if (!token.ok()) return close();
  if (*magic != kMagic || *version != kVersion) {
    SendByte(*client, 1, hello_deadline, peer).IgnoreError();
    return close();
  }
  if (!net::ConstantTimeEquals(*token, token_)) {
    LOG(WARNING) << "rendezvous store: refused a connection with a wrong job token (claimed rank "
                 << static_cast<int32_t>(*rank) << ")";
    SendByte(*client, 2, hello_deadline, peer).IgnoreError();
    return close();
  }
  if (!SendByte(*client, 0, hello_deadline, peer).ok()) return close();
  const int32_t client_rank = static_cast<int32_t>(*rank);
  peer = absl::StrCat("rank ", client_rank);
  bool said_bye = false;
  while (HandleRequest(*client, peer, &said_bye)) {
  }
  std::lock_guard<std::mutex> lock(mutex_);
  client->Close();
  if (!said_bye && client_rank >= 0 && !stopping_) {
    // The value orders losses: a dead rank is usually followed by the ranks
    // its death made fail, and the first one is the one to report.
    data_[absl::StrCat("lost/", client_rank)] = std::to_string(++lost_count_);
    changed_.notify_all();
  }
}

bool TcpStoreServer::HandleRequest(const net::Socket& client, const std::string& peer, bool* said_bye) {
  absl::StatusOr<uint8_t> op = RecvByte(client, net::After(kIdle), peer);
  if (!op.ok()) return false;
  const net::Deadline deadline = net::After(kIoTimeout);
  absl::StatusOr<std::string> key = net::RecvString(client, kMaxKey, deadline, peer);
  if (!key.ok()) return false;
  switch (*op) {
    case kSet:
      return ServeSet(client, *key, deadline, peer);
    case kGet:
      return ServeGet(client, *key, deadline, peer);
    case kAdd:
      return ServeAdd(client, *key, deadline, peer);
    case kCheck:
      return ServeCheck(client, *key, deadline, peer);
    case kBye:
      // Acknowledged, so that once Close returns the rank is known to have
      // left cleanly: a disconnect after it is never reported as a loss.
      *said_bye = true;
      SendByte(client, 0, deadline, peer).IgnoreError();
      return false;
    default:
      LOG(WARNING) << "rendezvous store: " << peer << " sent unknown op " << static_cast<int>(*op)
                   << "; closing its connection";
      return false;
  }
}

bool TcpStoreServer::ServeSet(const net::Socket& client, const std::string& key, net::Deadline deadline,
                              const std::string& peer) {
  absl::StatusOr<std::string> value = net::RecvString(client, kMaxValue, deadline, peer);
  if (!value.ok()) return false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    data_[key] = *std::move(value);
  }
  changed_.notify_all();
  return SendByte(client, 0, deadline, peer).ok();
}

bool TcpStoreServer::ServeGet(const net::Socket& client, const std::string& key, net::Deadline deadline,
                              const std::string& peer) {
  absl::StatusOr<uint32_t> timeout_ms = net::RecvU32(client, deadline, peer);
  if (!timeout_ms.ok()) return false;
  std::string value;
  bool found;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    const bool must_wait = data_.count(key) == 0;
    waiting_ += must_wait;
    // In slices, so that a rank that dies while it waits is reported
    // lost at once, not when its wait would have ended.
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(*timeout_ms);
    bool left = false;
    do {
      found = changed_.wait_until(lock, std::min(end, std::chrono::steady_clock::now() + kGetSlice),
                                  [&] { return stopping_ || data_.count(key) > 0; });
      left = !found && PeerClosed(client);
    } while (!found && !left && std::chrono::steady_clock::now() < end);
    waiting_ -= must_wait;
    if (left) return false;
    found = found && !stopping_;
    if (found) value = data_[key];
  }
  if (!found) return SendByte(client, 1, net::After(kIoTimeout), peer).ok();
  const net::Deadline reply = net::After(kIoTimeout);
  return SendByte(client, 0, reply, peer).ok() && net::SendString(client, value, reply, peer).ok();
}

bool TcpStoreServer::ServeAdd(const net::Socket& client, const std::string& key, net::Deadline deadline,
                              const std::string& peer) {
  absl::StatusOr<uint64_t> delta = RecvU64(client, deadline, peer);
  if (!delta.ok()) return false;
  int64_t result = 0;
  bool numeric;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::string& slot = data_[key];
    int64_t current = 0;
    numeric = slot.empty() || absl::SimpleAtoi(slot, &current);
    if (numeric) {
      result = current + static_cast<int64_t>(*delta);
      slot = std::to_string(result);
    }
  }
  if (!numeric) return SendByte(client, 1, deadline, peer).ok();
  changed_.notify_all();
  return SendByte(client, 0, deadline, peer).ok() && SendU64(client, static_cast<uint64_t>(result), deadline, peer).ok();
}

bool TcpStoreServer::ServeCheck(const net::Socket& client, const std::string& key, net::Deadline deadline,
                                const std::string& peer) {
  bool present;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    present = data_.count(key) > 0;
  }
  return SendByte(client, present ? 1 : 0, deadline, peer).ok();
}

// ---- Client

absl::StatusOr<std::unique_ptr<TcpStoreClient>> TcpStoreClient::Connect(const std::string& host, int port,
                                                                        const std::string& token, int rank,
                                                                        net::Deadline deadline) {
  const std::string peer = absl::StrFormat("the rendezvous store at %s:%d", host, port);
  absl::StatusOr<net::Socket> socket = net::Connect(host, port, deadline);
  if (!socket.ok()) {
    return absl::DeadlineExceededError(absl::StrFormat("%s: %s", peer, socket.status().message()));
  }
  const net::Deadline hello = net::After(kIoTimeout);
  absl::Status status = net::SendU32(*socket, kMagic, hello, peer);
  if (status.ok()) status = net::SendU32(*socket, kVersion, hello, peer);
  if (status.ok()) status = net::SendU32(*socket, static_cast<uint32_t>(rank), hello, peer);
  if (status.ok()) status = net::SendString(*socket, token, hello, peer);
  RETURN_IF_ERROR(status);
  ASSIGN_OR_RETURN(const uint8_t answer, RecvByte(*socket, hello, peer));
  if (answer == 2) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "%s refused our job token: every rank must have the same RENDEZVOUS_TOKEN", peer));
  }
  if (answer != 0) {
    return absl::FailedPreconditionError(absl::StrFormat("%s speaks another protocol version", peer));
  }
  return std::unique_ptr<TcpStoreClient>(new TcpStoreClient(*std::move(socket), peer));
}

TcpStoreClient::~TcpStoreClient() { Close().IgnoreError(); }

absl::Status TcpStoreClient::SendRequest(uint8_t op, const std::string& key, net::Deadline deadline) {
  if (!socket_.valid()) return absl::UnavailableError("store connection is closed");
  RETURN_IF_ERROR(SendByte(socket_, op, deadline, peer_));
  return net::SendString(socket_, key, deadline, peer_);
}

absl::Status TcpStoreClient::Set(const std::string& key, const std::string& value) {
  const net::Deadline d = net::After(kIoTimeout);
  absl::Status s = SendRequest(kSet, key, d);
  if (s.ok()) s = net::SendString(socket_, value, d, peer_);
  if (s.ok()) s = RecvByte(socket_, d, peer_).status();
  return Dropped(std::move(s));
}

absl::Status TcpStoreClient::Dropped(absl::Status status) {
  // A request cut off halfway leaves the stream at an unknown place: the
  // connection is of no more use, and closing it now spares Close's bye (a
  // frozen server would not answer it).
  if (!status.ok()) socket_.Close();
  return status;
}

absl::StatusOr<std::string> TcpStoreClient::Get(const std::string& key, std::chrono::milliseconds timeout,
                                                std::chrono::milliseconds io_timeout) {
  const net::Deadline d = net::After(timeout + io_timeout);
  absl::Status s = SendRequest(kGet, key, d);
  if (s.ok()) s = net::SendU32(socket_, static_cast<uint32_t>(std::min<int64_t>(timeout.count(), UINT32_MAX)), d, peer_);
  if (!s.ok()) return Dropped(s);
  absl::StatusOr<uint8_t> status = RecvByte(socket_, d, peer_);
  if (!status.ok()) return Dropped(status.status());
  if (*status == 1) {
    return absl::DeadlineExceededError(
        absl::StrFormat("key \"%s\" not set within %d ms", key, timeout.count()));
  }
  absl::StatusOr<std::string> value = net::RecvString(socket_, kMaxValue, d, peer_);
  if (!value.ok()) return Dropped(value.status());
  return value;
}

absl::StatusOr<int64_t> TcpStoreClient::Add(const std::string& key, int64_t delta) {
  const net::Deadline d = net::After(kIoTimeout);
  absl::Status s = SendRequest(kAdd, key, d);
  if (s.ok()) s = SendU64(socket_, static_cast<uint64_t>(delta), d, peer_);
  if (!s.ok()) return Dropped(s);
  absl::StatusOr<uint8_t> status = RecvByte(socket_, d, peer_);
  if (!status.ok()) return Dropped(status.status());
  if (*status != 0) return absl::InvalidArgumentError(absl::StrFormat("key \"%s\" does not hold an integer", key));
  absl::StatusOr<uint64_t> value = RecvU64(socket_, d, peer_);
  if (!value.ok()) return Dropped(value.status());
  return static_cast<int64_t>(*value);
}

absl::StatusOr<bool> TcpStoreClient::Check(const std::string& key, std::chrono::milliseconds io_timeout) {
  const net::Deadline d = net::After(io_timeout);
  if (absl::Status s = SendRequest(kCheck, key, d); !s.ok()) return Dropped(s);
  absl::StatusOr<uint8_t> present = RecvByte(socket_, d, peer_);
  if (!present.ok()) return Dropped(present.status());
  return *present == 1;
}

absl::Status TcpStoreClient::Close() {
  if (!socket_.valid()) return absl::OkStatus();
  const net::Deadline d = net::After(std::chrono::seconds(5));
  absl::Status s = SendRequest(kBye, "", d);
  if (s.ok()) s = RecvByte(socket_, d, peer_).status();
  socket_.Close();
  return s;
}

}  // namespace llama
