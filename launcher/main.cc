// //launcher: prepares and starts a job's worker processes, as torchrun does
// for Meta's reference.
//
// What lands so far: torchrun's topology flags, validated, and the exact
// environment each local rank will receive, printed as a plan. Spawning and
// supervising the workers is the Launcher issue's work (see README.md).

#include <cstdio>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "launcher/world.h"

DEFINE_int32(nnodes, 1, "Number of nodes in the job (torchrun's --nnodes).");
DEFINE_int32(nproc_per_node, 1, "Worker processes on this node, one per GPU (torchrun's flag).");
DEFINE_int32(node_rank, 0, "This node's index, 0 <= node_rank < nnodes (torchrun's flag).");
DEFINE_string(master_addr, "127.0.0.1", "Address of the node that hosts rank 0's rendezvous store.");
DEFINE_int32(master_port, llama::kDefaultMasterPort, "Port of rank 0's rendezvous store.");

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "Plans a Llama 2 job's worker processes.\n"
      "  launcher --nproc_per_node=N [--nnodes=M --node_rank=K --master_addr=HOST "
      "--master_port=PORT]\n"
      "prints each local rank's environment (RANK, LOCAL_RANK, WORLD_SIZE, ...).");
  gflags::ParseCommandLineFlags(&argc, &argv, /*remove_flags=*/true);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;

  llama::WorldOptions options;
  options.nnodes = FLAGS_nnodes;
  options.nproc_per_node = FLAGS_nproc_per_node;
  options.node_rank = FLAGS_node_rank;
  options.master_addr = FLAGS_master_addr;
  options.master_port = FLAGS_master_port;
  absl::StatusOr<std::vector<llama::RankInfo>> ranks = llama::LocalRanks(options);
  if (!ranks.ok()) {
    std::fprintf(stderr, "launcher: %s\n", std::string(ranks.status().message()).c_str());
    return 2;
  }
  for (const llama::RankInfo& rank : *ranks) {
    std::printf("local rank %d:", rank.local_rank);
    for (const auto& [name, value] : llama::WorkerEnvironment(options, rank)) {
      std::printf(" %s=%s", name.c_str(), value.c_str());
    }
    std::printf("\n");
  }
  return 0;
}
