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

namespace llama {

// torchrun's default rendezvous port, kept so existing firewall rules apply.
inline constexpr int kDefaultMasterPort = 29500;

struct WorldOptions {
  int nnodes = 1;
  int nproc_per_node = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = kDefaultMasterPort;
};

// One worker process's place in the job.
struct RankInfo {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  int local_world_size = 1;
  int node_rank = 0;
};

// Checks each option against its range; errors name the flag
// (--nnodes, --node_rank, ...) and the value given.
absl::Status ValidateWorldOptions(const WorldOptions& options);

// The ranks this node starts, in local_rank order. Validates first.
absl::StatusOr<std::vector<RankInfo>> LocalRanks(const WorldOptions& options);

// The variables torchrun sets for a worker: RANK, LOCAL_RANK, WORLD_SIZE,
// LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT.
std::vector<std::pair<std::string, std::string>> WorkerEnvironment(
    const WorldOptions& options, const RankInfo& rank);

}  // namespace llama

#endif  // LLAMA_LAUNCHER_WORLD_H_
