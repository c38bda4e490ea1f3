// Collectives for CPU ranks over plain TCP, across processes and hosts.
//
// The ranks form a ring (each connects to rank + 1 and accepts rank - 1),
// and all-reduce is the bandwidth-optimal ring algorithm: a reduce-scatter
// then an all-gather, each of world_size - 1 steps moving 1/world_size of
// the data, so every rank sends and receives 2 (n - 1) / n of the buffer
// whatever n is. Each element's sum is computed by exactly one rank and then
// copied, so all ranks end bit-identical. Sends and receives of a step run
// together (poll), so large buffers never deadlock on kernel buffers.
//
// A peer that exits closes its sockets: the next collective fails at once,
// naming the first rank the rendezvous store saw disappear. A peer that
// hangs fails the collective after --collective_timeout.

#ifndef LLAMA_WORKER_COLLECTIVES_TCP_COMMUNICATOR_H_
#define LLAMA_WORKER_COLLECTIVES_TCP_COMMUNICATOR_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/net.h"
#include "worker/collectives/communicator.h"
#include "worker/collectives/rendezvous.h"

namespace llama {

class TcpCommunicator final : public Communicator {
 public:
  // Connects the ring, exchanging addresses through `rendezvous` (which
  // must outlive the communicator: it is also asked who died on failure).
  static absl::StatusOr<std::unique_ptr<TcpCommunicator>> Create(Rendezvous* rendezvous,
                                                                 std::chrono::milliseconds timeout);

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  absl::Status AllReduceSum(float* data, size_t count) override;
  // Column blocks of width / world_size become the ring's chunks (the rows
  // regrouped by block around the ring, then put back), so each element is
  // summed in an order fixed by its column. Two ranks add in one order
  // whatever the chunks (a + b = b + a); a width the world does not divide
  // falls back to AllReduceSum.
  absl::Status AllReduceSumRows(float* data, size_t rows, size_t width) override;
  absl::Status AllGather(const float* send, size_t count, float* recv) override;
  absl::Status Broadcast(void* data, size_t bytes, int root) override;

 private:
  TcpCommunicator(Rendezvous* rendezvous, int rank, int world_size, std::chrono::milliseconds timeout)
      : rendezvous_(rendezvous), rank_(rank), world_size_(world_size), timeout_(timeout) {}
  // One ring step: send to the next rank while receiving from the previous.
  absl::Status Step(const void* send, size_t send_bytes, void* recv, size_t recv_bytes);
  // Rewrites a failed collective's error to name the rank that was lost first.
  absl::Status Explain(absl::Status failure, const char* collective);

  Rendezvous* rendezvous_;
  int rank_;
  int world_size_;
  std::chrono::milliseconds timeout_;
  net::Socket next_, prev_;
  std::string next_name_, prev_name_;
  std::vector<float> scratch_;
  std::vector<float> blocks_;  // AllReduceSumRows' regrouped rows.
};

}  // namespace llama

#endif  // LLAMA_WORKER_COLLECTIVES_TCP_COMMUNICATOR_H_
