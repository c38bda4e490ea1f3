#include "base/process.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
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
  // Everything the child needs is prepared before fork: after it, only
  // async-signal-safe calls.
  std::vector<char*> argv, envp;
  for (const std::string& a : options.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : options.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
  if (options.capture_output && (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0)) {
    return absl::ResourceExhaustedError(absl::StrFormat("pipe: %s", std::strerror(errno)));
  }
  const int inherit_fd = options.inherit_fd;
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int cpu : options.cpus) CPU_SET(cpu, &cpus);
  const bool set_cpus = !options.cpus.empty();
  const pid_t parent = getpid();
  // Signals wait until the child has reset its handlers: a parent's handler
  // run in the child would act for the parent (write to its pipes).
  sigset_t all, before;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &before);
  const pid_t pid = fork();
  const int fork_error = errno;
  if (pid != 0) pthread_sigmask(SIG_SETMASK, &before, nullptr);
  if (pid < 0) return absl::ResourceExhaustedError(absl::StrFormat("fork: %s", std::strerror(fork_error)));
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // The parent died before prctl.
    for (int sig : {SIGINT, SIGTERM, SIGPIPE, SIGCHLD}) signal(sig, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    const auto redirect = [](const std::string& path, int fd) {
      if (path.empty()) return;
      const int file = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (file < 0) _exit(126);
      dup2(file, fd);
    };
    if (options.capture_output) {
      dup2(out_pipe[1], STDOUT_FILENO);
      dup2(err_pipe[1], STDERR_FILENO);
    } else {
      redirect(options.stdout_path, STDOUT_FILENO);
      redirect(options.stderr_path, STDERR_FILENO);
    }
    if (inherit_fd >= 0 && fcntl(inherit_fd, F_SETFD, 0) != 0) _exit(126);
    if (set_cpus && sched_setaffinity(0, sizeof cpus, &cpus) != 0) _exit(126);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  setpgid(pid, pid);  // Also from the parent, so signals sent right away reach the group.
  auto process = std::unique_ptr<Process>(new Process(pid));
  if (options.capture_output) {
    close(out_pipe[1]);
    close(err_pipe[1]);
    process->stdout_fd_ = out_pipe[0];
    process->stderr_fd_ = err_pipe[0];
  }
  return process;
}

Process::~Process() {
  if (stdout_fd_ >= 0) close(stdout_fd_);
  if (stderr_fd_ >= 0) close(stderr_fd_);
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
