#include "worker/collectives/tcp_communicator.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"

namespace llama {
namespace {

constexpr uint32_t kPeerMagic = 0x52494E47;  // "RING"

// [begin, end) of chunk `i` when `count` elements are cut into `parts`.
std::pair<size_t, size_t> Chunk(size_t count, int parts, int i) {
  const size_t base = count / parts, extra = count % parts;
  const size_t begin = i * base + std::min<size_t>(i, extra);
  return {begin, begin + base + (static_cast<size_t>(i) < extra ? 1 : 0)};
}

int Mod(int a, int n) { return ((a % n) + n) % n; }

}  // namespace

absl::StatusOr<std::unique_ptr<TcpCommunicator>> TcpCommunicator::Create(Rendezvous* rendezvous,
                                                                          std::chrono::milliseconds timeout) {
  const RendezvousOptions& o = rendezvous->options();
  auto comm = std::unique_ptr<TcpCommunicator>(new TcpCommunicator(rendezvous, o.rank, o.world_size, timeout));
  if (o.world_size == 1) return comm;
  TcpStoreClient& store = rendezvous->store();
  // Peers reach us on the interface that reaches the store.
  ASSIGN_OR_RETURN(std::string address, store.LocalAddress());
  ASSIGN_OR_RETURN(net::Socket listener, net::Listen(address, 0));
  ASSIGN_OR_RETURN(int port, net::LocalPort(listener));
  RETURN_IF_ERROR(store.Set(absl::StrCat("ring/", o.rank), absl::StrCat(address, ":", port)));
  const int next = (o.rank + 1) % o.world_size, prev = Mod(o.rank - 1, o.world_size);
  comm->next_name_ = absl::StrCat("rank ", next);
  comm->prev_name_ = absl::StrCat("rank ", prev);
  ASSIGN_OR_RETURN(std::string next_address, store.Get(absl::StrCat("ring/", next), o.join_timeout));
  const std::vector<std::string> host_port = absl::StrSplit(next_address, ':');
  int next_port = 0;
  if (host_port.size() != 2 || !absl::SimpleAtoi(host_port[1], &next_port)) {
    return absl::InvalidArgumentError(absl::StrFormat("rank %d published a bad address \"%s\"", next, next_address));
  }
  const net::Deadline deadline = net::After(o.join_timeout);
  ASSIGN_OR_RETURN(comm->next_, net::Connect(host_port[0], next_port, deadline));
  RETURN_IF_ERROR(net::SendU32(comm->next_, kPeerMagic, deadline, comm->next_name_));
  RETURN_IF_ERROR(net::SendU32(comm->next_, o.rank, deadline, comm->next_name_));
  RETURN_IF_ERROR(net::SendString(comm->next_, o.token, deadline, comm->next_name_));
  // Only our ring predecessor, with the job's token, may connect.
  while (true) {
    absl::StatusOr<net::Socket> in = net::Accept(listener, deadline);
    if (!in.ok()) {
      return absl::DeadlineExceededError(absl::StrFormat("rank %d never connected to rank %d: %s", prev, o.rank,
                                                         in.status().message()));
    }
    const net::Deadline d = net::After(std::chrono::seconds(10));
    absl::StatusOr<uint32_t> magic = net::RecvU32(*in, d, comm->prev_name_);
    absl::StatusOr<uint32_t> from = magic.ok() ? net::RecvU32(*in, d, comm->prev_name_) : magic;
    absl::StatusOr<std::string> token = from.ok() ? net::RecvString(*in, 1024, d, comm->prev_name_) : from.status();
    if (token.ok() && *magic == kPeerMagic && static_cast<int>(*from) == prev && *token == o.token) {
      comm->prev_ = *std::move(in);
      break;
    }
  }
  return comm;
}

absl::Status TcpCommunicator::Explain(absl::Status failure, const char* collective) {
  // Give the store a moment to notice the exit that broke our sockets, but
  // no more than a short budget: a frozen rank 0 (SIGSTOP, a hung host)
  // keeps its store's socket open and answers nothing, and its store client
  // would otherwise wait 30 s per request on top of the collective's own
  // deadline (a peer stopped mid-job ended the job after 38 s at
  // --collective_timeout=5).
  const auto budget_end = std::chrono::steady_clock::now() +
                          std::min<std::chrono::milliseconds>(timeout_, std::chrono::seconds(2));
  const auto left = [&] {
    return std::max(std::chrono::milliseconds(1), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                      budget_end - std::chrono::steady_clock::now()));
  };
  std::string lost;
  int first = 1 << 30;
  for (int attempt = 0; attempt < 10 && lost.empty() && std::chrono::steady_clock::now() < budget_end; ++attempt) {
    for (int r = 0; r < world_size_; ++r) {
      absl::StatusOr<bool> present = rendezvous_->store().Check(absl::StrCat("lost/", r), left());
      if (!present.ok()) {
        return absl::UnavailableError(absl::StrFormat(
            "%s failed (%s), and the rendezvous store on rank 0 is unreachable too: lost rank 0", collective,
            failure.message()));
      }
      if (!*present) continue;
      absl::StatusOr<std::string> order =
          rendezvous_->store().Get(absl::StrCat("lost/", r), std::chrono::seconds(1), left());
      int value = 0;
      if (order.ok() && absl::SimpleAtoi(*order, &value) && value < first) {
        first = value;
        lost = absl::StrCat(r);
      }
    }
    if (lost.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (lost.empty()) {
    return Annotate(failure, absl::StrCat(collective, " failed"));
  }
  return absl::UnavailableError(absl::StrFormat(
      "lost rank %s (its process exited or its connection dropped) during %s: %s", lost, collective,
      failure.message()));
}

absl::Status TcpCommunicator::Step(const void* send, size_t send_bytes, void* recv, size_t recv_bytes) {
  return net::Exchange(next_, send, send_bytes, prev_, recv, recv_bytes, net::After(timeout_), next_name_,
                       prev_name_);
}

absl::Status TcpCommunicator::AllReduceSum(float* data, size_t count) {
  const int n = world_size_;
  if (n == 1 || count == 0) return absl::OkStatus();
  scratch_.resize(count / n + 1);
  // Reduce-scatter: after step s, chunk (rank - s - 1) holds s + 2 ranks' sums.
  for (int step = 0; step < n - 1; ++step) {
    const auto [send_begin, send_end] = Chunk(count, n, Mod(rank_ - step, n));
    const auto [recv_begin, recv_end] = Chunk(count, n, Mod(rank_ - step - 1, n));
    absl::Status s = Step(data + send_begin, (send_end - send_begin) * sizeof(float), scratch_.data(),
                          (recv_end - recv_begin) * sizeof(float));
    if (!s.ok()) return Explain(s, "all-reduce");
    for (size_t i = recv_begin; i < recv_end; ++i) data[i] += scratch_[i - recv_begin];
  }
  // All-gather the reduced chunks: rank r owns chunk r + 1.
  for (int step = 0; step < n - 1; ++step) {
    const auto [send_begin, send_end] = Chunk(count, n, Mod(rank_ + 1 - step, n));
    const auto [recv_begin, recv_end] = Chunk(count, n, Mod(rank_ - step, n));
    absl::Status s = Step(data + send_begin, (send_end - send_begin) * sizeof(float), data + recv_begin,
                          (recv_end - recv_begin) * sizeof(float));
    if (!s.ok()) return Explain(s, "all-reduce");
  }
  return absl::OkStatus();
}

absl::Status TcpCommunicator::AllReduceSumRows(float* data, size_t rows, size_t width) {
  const size_t n = world_size_;
  if (n <= 2 || rows <= 1 || width % n != 0) return AllReduceSum(data, rows * width);
  // [rows][n][block] -> [n][rows][block]: chunk c of the ring is then
  // column block c of every row.
  const size_t block = width / n;
  blocks_.resize(rows * width);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < n; ++c) {
      std::memcpy(&blocks_[(c * rows + r) * block], data + r * width + c * block, block * sizeof(float));
    }
  }
  RETURN_IF_ERROR(AllReduceSum(blocks_.data(), rows * width));
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < n; ++c) {
      std::memcpy(data + r * width + c * block, &blocks_[(c * rows + r) * block], block * sizeof(float));
    }
  }
  return absl::OkStatus();
}

absl::Status TcpCommunicator::AllGather(const float* send, size_t count, float* recv) {
  const int n = world_size_;
  if (recv + rank_ * count != send) std::memmove(recv + rank_ * count, send, count * sizeof(float));
  for (int step = 0; step < n - 1; ++step) {
    const int send_block = Mod(rank_ - step, n), recv_block = Mod(rank_ - step - 1, n);
    absl::Status s = Step(recv + send_block * count, count * sizeof(float), recv + recv_block * count,
                          count * sizeof(float));
    if (!s.ok()) return Explain(s, "all-gather");
  }
  return absl::OkStatus();
}

absl::Status TcpCommunicator::Broadcast(void* data, size_t bytes, int root) {
  if (world_size_ == 1) return absl::OkStatus();
  // Along the ring from root: receive from prev (unless root), pass to next
  // (unless next is root).
  const bool receives = rank_ != root;
  const bool sends = (rank_ + 1) % world_size_ != root;
  absl::Status s;
  if (receives) s = net::RecvAll(prev_, data, bytes, net::After(timeout_), prev_name_);
  if (s.ok() && sends) s = net::SendAll(next_, data, bytes, net::After(timeout_), next_name_);
  return s.ok() ? s : Explain(s, "broadcast");
}

}  // namespace llama
