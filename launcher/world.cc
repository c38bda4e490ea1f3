#include "launcher/world.h"

#include <string>
#include <utility>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace llama {

absl::Status ValidateWorldOptions(const WorldOptions& options) {
  if (options.nnodes < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--nnodes=%d: expected at least 1", options.nnodes));
  }
  if (options.nproc_per_node < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--nproc_per_node=%d: expected at least 1", options.nproc_per_node));
  }
  if (options.node_rank < 0 || options.node_rank >= options.nnodes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--node_rank=%d: expected 0 <= node_rank < --nnodes (%d)", options.node_rank,
        options.nnodes));
  }
  if (static_cast<int64_t>(options.nnodes) * options.nproc_per_node > (1 << 20)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--nnodes=%d x --nproc_per_node=%d: world size too large", options.nnodes,
        options.nproc_per_node));
  }
  if (options.master_addr.empty()) {
    return absl::InvalidArgumentError("--master_addr: expected a host name or address, got \"\"");
  }
  if (options.master_port < 1 || options.master_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--master_port=%d: expected 1..65535", options.master_port));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<WorkerEnvironment>> LocalRanks(const WorldOptions& options) {
  RETURN_IF_ERROR(ValidateWorldOptions(options));
  std::vector<WorkerEnvironment> ranks;
  ranks.reserve(options.nproc_per_node);
  for (int local_rank = 0; local_rank < options.nproc_per_node; ++local_rank) {
    WorkerEnvironment env;
    env.rank = options.node_rank * options.nproc_per_node + local_rank;
    env.local_rank = local_rank;
    env.world_size = options.nnodes * options.nproc_per_node;
    env.local_world_size = options.nproc_per_node;
    env.node_rank = options.node_rank;
    env.master_addr = options.master_addr;
    env.master_port = options.master_port;
    env.distributed = true;
    ranks.push_back(std::move(env));
  }
  return ranks;
}

}  // namespace llama
