// For tests: the ranks of one job as threads of one process, each joined
// over TCP with its own store connection and sockets, as separate processes
// have, rank 0 hosting the store.

#ifndef LLAMA_WORKER_COLLECTIVES_THREAD_RANKS_H_
#define LLAMA_WORKER_COLLECTIVES_THREAD_RANKS_H_

#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "worker/collectives/rendezvous.h"
#include "worker/collectives/tcp_communicator.h"

namespace llama::testing {

// Runs body(rank, communicator) on `world` threads and waits for them all.
// With `finish`, each rank leaves through Rendezvous::Finish (asserted OK);
// without, it just returns (a test of a rank that vanishes).
inline void RunRanksOnThreads(int world, const std::function<void(int, Communicator&)>& body,
                              std::chrono::seconds collective_timeout = std::chrono::seconds(10), bool finish = true) {
  // Bound before any rank starts, as the launcher does, and hosted by rank 0.
  absl::StatusOr<net::Socket> listener = net::Listen("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok()) << listener.status();
  const int port = *net::LocalPort(*listener);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      RendezvousOptions options;
      options.master_port = port;
      if (rank == 0) options.listen_fd = listener->fd();
      options.rank = rank;
      options.world_size = world;
      options.token = "t";
      options.join_timeout = std::chrono::seconds(20);
      absl::StatusOr<std::unique_ptr<Rendezvous>> rendezvous = Rendezvous::Join(options);
      ASSERT_TRUE(rendezvous.ok()) << rendezvous.status();
      absl::StatusOr<std::unique_ptr<TcpCommunicator>> comm =
          TcpCommunicator::Create(rendezvous->get(), collective_timeout);
      ASSERT_TRUE(comm.ok()) << comm.status();
      body(rank, **comm);
      if (finish) {
        ASSERT_TRUE((*rendezvous)->Finish().ok());
      }
    });
  }
  for (std::thread& t : threads) t.join();
}

}  // namespace llama::testing

#endif  // LLAMA_WORKER_COLLECTIVES_THREAD_RANKS_H_
