// The environment torchrun (and our launcher) gives each worker process:
// both sides of it, so that the launcher writes exactly what a worker reads.

#ifndef LLAMA_WORKER_COLLECTIVES_ENVIRONMENT_H_
#define LLAMA_WORKER_COLLECTIVES_ENVIRONMENT_H_

#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace llama {

// torchrun's default rendezvous port, kept so existing firewall rules apply.
inline constexpr int kDefaultMasterPort = 29500;

struct WorkerEnvironment {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  int local_world_size = 1;
  int node_rank = 0;             // GROUP_RANK
  std::string master_addr = "127.0.0.1";
  int master_port = kDefaultMasterPort;
  std::string token;             // RENDEZVOUS_TOKEN
  int listen_fd = -1;            // RENDEZVOUS_LISTEN_FD: rank 0's store socket, bound by the launcher.
  bool distributed = false;      // Set when the job variables are present.
};

// Reads RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR,
// MASTER_PORT, RENDEZVOUS_TOKEN and RENDEZVOUS_LISTEN_FD through `get` (default: getenv). With
// none of RANK / WORLD_SIZE set, the process is a single rank. Errors name
// the variable and its value.
absl::StatusOr<WorkerEnvironment> ReadWorkerEnvironment(
    const std::function<const char*(const char*)>& get = [](const char* name) { return std::getenv(name); });

// The variables that ReadWorkerEnvironment reads back as `env` (all but
// `distributed`): torchrun's names, then RENDEZVOUS_TOKEN and
// RENDEZVOUS_LISTEN_FD where set.
std::vector<std::pair<std::string, std::string>> WorkerEnvironmentVariables(const WorkerEnvironment& env);

}  // namespace llama

#endif  // LLAMA_WORKER_COLLECTIVES_ENVIRONMENT_H_
