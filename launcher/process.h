// Child processes for the launcher and the multi-process tests: spawned
// with an explicit environment, each in its own process group (so the
// whole job can be signalled and nothing outlives its supervisor), with
// stdout and stderr optionally sent to files.

#ifndef LLAMA_LAUNCHER_PROCESS_H_
#define LLAMA_LAUNCHER_PROCESS_H_

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
  std::string stdout_path;        // Empty: inherit.
  std::string stderr_path;        // Empty: inherit.
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

  // The exit status if the process has ended (reaping it), else nullopt.
  std::optional<ExitStatus> Poll();
  // Waits up to `timeout`; DeadlineExceeded if it is still running.
  absl::StatusOr<ExitStatus> Wait(std::chrono::milliseconds timeout);
  // Sends `signal` to the process group (the process and its children).
  void SignalGroup(int signal);

 private:
  explicit Process(pid_t pid) : pid_(pid) {}

  pid_t pid_;
  std::optional<ExitStatus> exit_;
};

}  // namespace llama

#endif  // LLAMA_LAUNCHER_PROCESS_H_
