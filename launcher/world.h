// The rank layout of a job, as torchrun defines it, and the environment
// each worker process receives.
//
// Ranks are numbered node by node: rank = node_rank * nproc_per_node +
// local_rank, so the ranks of one node are contiguous (tensor-parallel
// groups then stay inside a node, where NVLink is).

#ifndef LLAMA_LAUNCHER_WORLD_H_
#define LLAMA_LAUNCHER_WORLD_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/collectives/environment.h"

namespace llama {

struct WorldOptions {
  int nnodes = 1;
  int nproc_per_node = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = kDefaultMasterPort;
};

// Checks each option against its range; errors name the flag
// (--nnodes, --node_rank, ...) and the value given.
absl::Status ValidateWorldOptions(const WorldOptions& options);

// The environment of each rank this node starts, in local_rank order (no
// token or listening socket yet: the launcher adds them). Validates first.
absl::StatusOr<std::vector<WorkerEnvironment>> LocalRanks(const WorldOptions& options);

}  // namespace llama

#endif  // LLAMA_LAUNCHER_WORLD_H_
