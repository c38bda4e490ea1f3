#include "tools/local_ranks.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

#include "worker/dist/net.h"

namespace llama {

int RunLocalRanks(int world_size, const std::function<int(int rank, int port)>& run) {
  int port = 0;
  if (world_size > 1) {
    absl::StatusOr<int> free_port = net::PickFreePort();
    if (!free_port.ok()) {
      std::fprintf(stderr, "%s\n", std::string(free_port.status().message()).c_str());
      return 1;
    }
    port = *free_port;
  }
  std::fflush(stdout);
  std::vector<pid_t> children;
  for (int rank = 1; rank < world_size; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) _exit(run(rank, port));
    children.push_back(pid);
  }
  int result = run(0, port);
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) result = 1;
  }
  return result;
}

}  // namespace llama
