#include "worker/collectives/environment.h"

#include <cstdlib>
#include <tuple>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace llama {
namespace {

absl::Status ReadInt(const std::function<const char*(const char*)>& get, const char* name, int low, int high,
                     int* out) {
  const char* value = get(name);
  if (value == nullptr) return absl::OkStatus();
  int parsed;
  if (!absl::SimpleAtoi(value, &parsed) || parsed < low || parsed > high) {
    return absl::InvalidArgumentError(
        absl::StrFormat("environment variable %s=\"%s\": expected an integer in [%d, %d]", name, value, low, high));
  }
  *out = parsed;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<WorkerEnvironment> ReadWorkerEnvironment(const std::function<const char*(const char*)>& get) {
  WorkerEnvironment env;
  env.distributed = get("RANK") != nullptr || get("WORLD_SIZE") != nullptr;
  if (!env.distributed) return env;
  if (get("RANK") == nullptr || get("WORLD_SIZE") == nullptr) {
    return absl::InvalidArgumentError(
        "environment: RANK and WORLD_SIZE must be set together (a launcher such as //launcher sets both)");
  }
  for (const auto& [name, out, low, high] : {
           std::tuple<const char*, int*, int, int>{"WORLD_SIZE", &env.world_size, 1, 1 << 20},
           {"LOCAL_WORLD_SIZE", &env.local_world_size, 1, 1 << 20},
           {"MASTER_PORT", &env.master_port, 1, 65535},
       }) {
    RETURN_IF_ERROR(ReadInt(get, name, low, high, out));
  }
  RETURN_IF_ERROR(ReadInt(get, "RANK", 0, env.world_size - 1, &env.rank));
  env.local_rank = env.rank % env.local_world_size;
  RETURN_IF_ERROR(ReadInt(get, "LOCAL_RANK", 0, env.local_world_size - 1, &env.local_rank));
  env.node_rank = env.rank / env.local_world_size;
  RETURN_IF_ERROR(ReadInt(get, "GROUP_RANK", 0, env.world_size - 1, &env.node_rank));
  if (const char* addr = get("MASTER_ADDR"); addr != nullptr) env.master_addr = addr;
  if (env.master_addr.empty()) return absl::InvalidArgumentError("environment variable MASTER_ADDR is empty");
  if (const char* token = get("RENDEZVOUS_TOKEN"); token != nullptr) env.token = token;
  RETURN_IF_ERROR(ReadInt(get, "RENDEZVOUS_LISTEN_FD", 0, 1 << 20, &env.listen_fd));
  if (env.world_size > 1 && env.token.empty()) {
    return absl::InvalidArgumentError(
        "environment variable RENDEZVOUS_TOKEN is not set: a job of several ranks needs a shared secret "
        "(the launcher makes one)");
  }
  return env;
}

std::vector<std::pair<std::string, std::string>> WorkerEnvironmentVariables(const WorkerEnvironment& env) {
  std::vector<std::pair<std::string, std::string>> vars = {
      {"RANK", absl::StrCat(env.rank)},
      {"LOCAL_RANK", absl::StrCat(env.local_rank)},
      {"WORLD_SIZE", absl::StrCat(env.world_size)},
      {"LOCAL_WORLD_SIZE", absl::StrCat(env.local_world_size)},
      {"GROUP_RANK", absl::StrCat(env.node_rank)},
      {"MASTER_ADDR", env.master_addr},
      {"MASTER_PORT", absl::StrCat(env.master_port)},
  };
  if (!env.token.empty()) vars.emplace_back("RENDEZVOUS_TOKEN", env.token);
  if (env.listen_fd >= 0) vars.emplace_back("RENDEZVOUS_LISTEN_FD", absl::StrCat(env.listen_fd));
  return vars;
}

}  // namespace llama
