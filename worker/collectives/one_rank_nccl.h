// A job of one rank over NCCL, for GPU tests: its rendezvous (any free
// port) and communicator. (The worker itself uses no communicator for a
// world of one.)

#ifndef LLAMA_WORKER_COLLECTIVES_ONE_RANK_NCCL_H_
#define LLAMA_WORKER_COLLECTIVES_ONE_RANK_NCCL_H_

#include <chrono>
#include <memory>

#include "absl/status/statusor.h"
#include "base/status_macros.h"
#include "worker/collectives/nccl_communicator.h"
#include "worker/collectives/rendezvous.h"

namespace llama {

struct OneRankNccl {
  std::unique_ptr<Rendezvous> rendezvous;
  std::unique_ptr<NcclCommunicator> communicator;  // Destroyed first.
};

inline absl::StatusOr<OneRankNccl> JoinOneRankNccl() {
  RendezvousOptions options;
  options.master_port = 0;
  OneRankNccl job;
  ASSIGN_OR_RETURN(job.rendezvous, Rendezvous::Join(options));
  ASSIGN_OR_RETURN(job.communicator, NcclCommunicator::Create(job.rendezvous.get(), 0, std::chrono::seconds(30)));
  return job;
}

}  // namespace llama

#endif  // LLAMA_WORKER_COLLECTIVES_ONE_RANK_NCCL_H_
