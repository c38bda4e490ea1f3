#include "launcher/process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace llama {

std::string ExitStatus::Describe() const {
  if (signal != 0) return absl::StrFormat("signal %d (%s)", signal, strsignal(signal));
  return absl::StrFormat("exit code %d", code);
}

absl::StatusOr<std::unique_ptr<Process>> Process::Spawn(const ProcessOptions& options) {
  if (options.argv.empty()) return absl::InvalidArgumentError("no program to run");
  if (access(options.argv[0].c_str(), X_OK) != 0) {
    return absl::NotFoundError(
        absl::StrFormat("cannot run \"%s\": %s", options.argv[0], std::strerror(errno)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!options.stdout_path.empty()) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, options.stdout_path.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
  }
  if (!options.stderr_path.empty()) {
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, options.stderr_path.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
  }
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  // Own process group, default signal handling (the supervisor may ignore some).
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGPIPE);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

  std::vector<char*> argv, envp;
  for (const std::string& a : options.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : options.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  pid_t pid = 0;
  const int error = posix_spawn(&pid, options.argv[0].c_str(), &actions, &attributes, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (error != 0) {
    return absl::InternalError(absl::StrFormat("cannot start \"%s\": %s", options.argv[0], std::strerror(error)));
  }
  return std::unique_ptr<Process>(new Process(pid));
}

Process::~Process() {
  if (exit_.has_value()) return;
  SignalGroup(SIGKILL);
  int status;
  waitpid(pid_, &status, 0);
}

std::optional<ExitStatus> Process::Poll() {
  if (exit_.has_value()) return exit_;
  int status = 0;
  const pid_t done = waitpid(pid_, &status, WNOHANG);
  if (done != pid_) return std::nullopt;
  ExitStatus exit;
  if (WIFSIGNALED(status)) {
    exit.code = -1;
    exit.signal = WTERMSIG(status);
  } else {
    exit.code = WEXITSTATUS(status);
  }
  exit_ = exit;
  return exit_;
}

absl::StatusOr<ExitStatus> Process::Wait(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (std::optional<ExitStatus> exit = Poll(); exit.has_value()) return *exit;
    if (std::chrono::steady_clock::now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrFormat("process %d still running after %d ms", pid_, timeout.count()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void Process::SignalGroup(int signal) {
  if (!exit_.has_value()) ::kill(-pid_, signal);
}

}  // namespace llama
