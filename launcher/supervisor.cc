#include "launcher/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "worker/progress_line.h"

namespace llama {
namespace {

// Signals reach the supervision loop through a pipe (async-signal-safe).
int g_signal_pipe[2] = {-1, -1};

void OnSignal(int) {
  const char byte = 1;
  const ssize_t ignored = write(g_signal_pipe[1], &byte, 1);
  (void)ignored;
}

// Installs the handlers for the loop's lifetime, restoring the old ones.
class SignalCatcher {
 public:
  explicit SignalCatcher(bool catch_sigint) : catch_sigint_(catch_sigint) {
    if (g_signal_pipe[0] < 0 && pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return;
    struct sigaction action = {};
    action.sa_handler = OnSignal;
    sigemptyset(&action.sa_mask);
    if (catch_sigint_) sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
  }
  ~SignalCatcher() {
    if (catch_sigint_) sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  int fd() const { return g_signal_pipe[0]; }
  // Number of signals received since the last call.
  int Drain() {
    char buffer[64];
    int count = 0;
    ssize_t n;
    while ((n = read(g_signal_pipe[0], buffer, sizeof buffer)) > 0) count += n;
    return count;
  }

 private:
  bool catch_sigint_;
  struct sigaction old_int_ = {}, old_term_ = {};
};

// A worker's output stream: complete lines go to its log (and rank 0's
// stdout lines to the results).
struct Stream {
  int fd;
  int rank;
  bool is_stdout;
  std::string partial;
};

}  // namespace

std::string RankLogPath(const std::string& log_dir, int rank) { return absl::StrCat(log_dir, "/rank", rank, ".log"); }

absl::StatusOr<JobOutcome> SuperviseJob(const std::vector<WorkerLaunch>& workers, const SupervisorOptions& options) {
  std::error_code error;
  std::filesystem::create_directories(options.log_dir, error);
  if (error) {
    return absl::PermissionDeniedError(
        absl::StrFormat("--log_dir \"%s\": cannot create: %s", options.log_dir, error.message()));
  }
  SignalCatcher signals(options.catch_sigint);
  std::vector<std::unique_ptr<Process>> processes;
  std::vector<std::unique_ptr<FILE, int (*)(FILE*)>> logs;
  std::vector<Stream> streams;
  for (const WorkerLaunch& w : workers) {
    const std::string log_path = RankLogPath(options.log_dir, w.rank);
    logs.emplace_back(std::fopen(log_path.c_str(), "w"), &std::fclose);
    if (logs.back() == nullptr) {
      return absl::PermissionDeniedError(absl::StrFormat("cannot write log \"%s\": %s", log_path, std::strerror(errno)));
    }
    ProcessOptions process = w.process;
    process.capture_output = true;
    absl::StatusOr<std::unique_ptr<Process>> p = Process::Spawn(process);
    if (!p.ok()) return p.status();  // Already-started workers die with their Process objects.
    streams.push_back({(*p)->stdout_fd(), w.rank, true, ""});
    streams.push_back({(*p)->stderr_fd(), w.rank, false, ""});
    processes.push_back(*std::move(p));
  }

  JobOutcome outcome;
  bool stopping = false;
  auto kill_deadline = std::chrono::steady_clock::time_point::max();
  const auto stop_all = [&](int signal) {
    for (auto& p : processes) p->SignalGroup(signal);
  };
  const auto begin_stop = [&] {
    if (stopping) return;
    stopping = true;
    stop_all(SIGTERM);
    // A stopped worker (SIGSTOP, a debugger) takes its SIGTERM only once
    // continued: without this it would sit out the grace period.
    stop_all(SIGCONT);
    kill_deadline = std::chrono::steady_clock::now() + options.grace;
  };
  const auto emit = [&](Stream& s, absl::string_view line) {
    std::FILE* log = logs[(&s - streams.data()) / 2].get();
    std::fprintf(log, "[rank %d] %.*s\n", s.rank, static_cast<int>(line.size()), line.data());
    std::fflush(log);
    if (s.rank == 0 && s.is_stdout && options.results != nullptr) {
      std::fwrite(line.data(), 1, line.size(), options.results);
      std::fputc('\n', options.results);
      std::fflush(options.results);
    }
    if (s.rank == 0 && !s.is_stdout && options.progress != nullptr && absl::StartsWith(line, kProgressPrefix)) {
      const absl::string_view progress = line.substr(std::strlen(kProgressPrefix));
      std::fprintf(options.progress, "launcher: %.*s\n", static_cast<int>(progress.size()), progress.data());
      std::fflush(options.progress);
    }
    if (s.rank == 0 && !s.is_stdout && options.on_progress && absl::StartsWith(line, kProgressPrefix)) {
      options.on_progress(line.substr(std::strlen(kProgressPrefix)));
    }
  };

  size_t open_streams = streams.size();
  while (true) {
    std::vector<pollfd> fds;
    for (const Stream& s : streams) fds.push_back({s.fd, static_cast<short>(s.fd >= 0 ? POLLIN : 0), 0});
    fds.push_back({signals.fd(), POLLIN, 0});
    ::poll(fds.data(), fds.size(), 100);
    for (size_t i = 0; i < streams.size(); ++i) {
      Stream& s = streams[i];
      if (s.fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buffer[65536];
      const ssize_t n = read(s.fd, buffer, sizeof buffer);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {
        if (!s.partial.empty()) emit(s, s.partial);
        s.partial.clear();
        s.fd = -1;  // The Process owns and closes the descriptor.
        --open_streams;
        continue;
      }
      s.partial.append(buffer, n);
      size_t start = 0, newline;
      while ((newline = s.partial.find('\n', start)) != std::string::npos) {
        emit(s, absl::string_view(s.partial).substr(start, newline - start));
        start = newline + 1;
      }
      s.partial.erase(0, start);
    }
    if (options.stop != nullptr && *options.stop && !stopping) {
      outcome.interrupted = true;
      begin_stop();
    }
    if (const int received = signals.Drain(); received > 0) {
      outcome.interrupted = true;
      if (stopping || received > 1) {
        stop_all(SIGKILL);  // A second interrupt: no more grace.
      } else {
        begin_stop();
      }
    }
    bool all_done = true;
    bool all_clean = true;
    for (size_t i = 0; i < processes.size(); ++i) {
      std::optional<ExitStatus> exit = processes[i]->Poll();
      if (!exit.has_value()) {
        all_done = false;
        continue;
      }
      all_clean &= exit->success();
      if (!exit->success() && outcome.failed_rank < 0 && !outcome.interrupted) {
        outcome.failed_rank = workers[i].rank;
        outcome.failed_exit = *exit;
        outcome.failed_log = RankLogPath(options.log_dir, workers[i].rank);
        begin_stop();
      }
    }
    if (stopping && std::chrono::steady_clock::now() >= kill_deadline) {
      stop_all(SIGKILL);
      kill_deadline = std::chrono::steady_clock::time_point::max();
    }
    // Pipes may stay open after exit if a worker's child holds them: do not
    // wait for them then.
    if (all_done && (open_streams == 0 || stopping)) {
      outcome.all_exited_cleanly = all_clean;
      break;
    }
  }
  outcome.success = outcome.failed_rank < 0 && !outcome.interrupted;
  return outcome;
}

}  // namespace llama
