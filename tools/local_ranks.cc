#include "tools/local_ranks.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

#include "base/net.h"

namespace llama {

int RunLocalRanks(int world_size, const std::string& token,
                  const std::function<int(const RendezvousOptions& options)>& run) {
  RendezvousOptions options;
  options.world_size = world_size;
  options.token = token;
  options.master_port = 0;  // A job of one: any free port.
  net::Socket listener;
  if (world_size > 1) {
    absl::StatusOr<net::Socket> bound = net::Listen("127.0.0.1", 0);
    absl::StatusOr<int> port = bound.ok() ? net::LocalPort(*bound) : bound.status();
    if (!port.ok()) {
      std::fprintf(stderr, "%s\n", std::string(port.status().message()).c_str());
      return 1;
    }
    listener = *std::move(bound);
    options.master_port = *port;
  }
  std::fflush(stdout);
  std::vector<pid_t> children;
  for (int rank = 1; rank < world_size; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) {
      listener.Close();
      options.rank = rank;
      _exit(run(options));
    }
    children.push_back(pid);
  }
  options.rank = 0;
  options.listen_fd = listener.fd();
  int result = run(options);
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (result == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      result = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    }
  }
  return result;
}

}  // namespace llama
