// Child processes for the launcher and the multi-process tests: spawned
// with an explicit environment, each in its own process group (so the
// whole job can be signalled), killed by the kernel if the process that
// spawned them dies (PR_SET_PDEATHSIG: nothing outlives its supervisor,
// even one killed with SIGKILL), with stdout and stderr sent to files or
// captured through pipes.

#ifndef LLAMA_BASE_PROCESS_H_
#define LLAMA_BASE_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace llama {

struct ExitStatus {
  int code = 0;    // When exited normally.
  int signal = 0;  // When killed by a signal; then code is -1.

  bool success() const { return signal == 0 && code == 0; }
  // "exit code 1", "signal 9 (Killed)".
  std::string Describe() const;
};

struct ProcessOptions {
  std::vector<std::string> argv;  // argv[0] is the executable's path.
  std::vector<std::string> env;   // "NAME=value", the child's whole environment.
  std::string stdout_path;        // Empty: inherit (or capture).
  std::string stderr_path;        // Empty: inherit (or capture).
  // Give the parent pipes to the child's stdout and stderr (overrides the paths).
  bool capture_output = false;
  // A descriptor the child keeps open under the same number (all others
  // are close-on-exec), e.g. the listening socket handed to rank 0.
  int inherit_fd = -1;
  // The CPUs the child may run on (its affinity mask); empty: the parent's.
  std::vector<int> cpus = {};
};

// Not thread-safe. Destroying a running Process kills its process group
// (SIGKILL) and reaps it.
class Process {
 public:
  static absl::StatusOr<std::unique_ptr<Process>> Spawn(const ProcessOptions& options);
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  // Read ends of the captured stdout / stderr (-1 if not captured). Owned
  // by the Process; the caller may make them non-blocking.
  int stdout_fd() const { return stdout_fd_; }
  int stderr_fd() const { return stderr_fd_; }

  // The exit status if the process has ended (reaping it), else nullopt.
  std::optional<ExitStatus> Poll();
  // Waits up to `timeout`; DeadlineExceeded if it is still running.
  absl::StatusOr<ExitStatus> Wait(std::chrono::milliseconds timeout);
  // Sends `signal` to the process group (the process and its children).
  void SignalGroup(int signal);

 private:
  explicit Process(pid_t pid) : pid_(pid) {}

  pid_t pid_;
  int stdout_fd_ = -1;
  int stderr_fd_ = -1;
  std::optional<ExitStatus> exit_;
};

}  // namespace llama

#endif  // LLAMA_BASE_PROCESS_H_
