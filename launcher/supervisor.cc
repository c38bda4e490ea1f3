#include "launcher/supervisor.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/progress_line.h"
#include "base/status_macros.h"
#include "launcher/signal_catcher.h"

namespace llama {
namespace {

// A worker's output stream: complete lines go to its log (and rank 0's
// stdout lines to the results).
struct Stream {
  int fd;
  int rank;
  bool is_stdout;
  std::string partial;
};

// One supervised job: the workers' processes, their logs and output
// streams, and how the stopping goes.
class Supervision {
 public:
  Supervision(const std::vector<WorkerLaunch>& workers, const SupervisorOptions& options)
      : workers_(workers), options_(options) {}

  // Each worker started, with its log open and its output captured.
  absl::Status Start() {
    for (const WorkerLaunch& w : workers_) {
      const std::string log_path = RankLogPath(options_.log_dir, w.rank);
      logs_.emplace_back(std::fopen(log_path.c_str(), "w"), &std::fclose);
      if (logs_.back() == nullptr) {
        return absl::PermissionDeniedError(
            absl::StrFormat("cannot write log \"%s\": %s", log_path, std::strerror(errno)));
      }
      ProcessOptions process = w.process;
      process.capture_output = true;
      // Already-started workers die with their Process objects.
      ASSIGN_OR_RETURN(std::unique_ptr<Process> p, Process::Spawn(process));
      streams_.push_back({p->stdout_fd(), w.rank, true, ""});
      streams_.push_back({p->stderr_fd(), w.rank, false, ""});
      processes_.push_back(std::move(p));
    }
    open_streams_ = streams_.size();
    return absl::OkStatus();
  }

  // Until every worker has exited (and its output is read), stopping them
  // all at the first failure or interrupt.
  JobOutcome Run(SignalCatcher& signals) {
    while (true) {
      ReadOutput(signals.fd());
      HandleInterrupts(signals);
      bool all_clean = true;
      const bool all_done = PollExits(all_clean);
      if (stopping_ && std::chrono::steady_clock::now() >= kill_deadline_) {
        StopAll(SIGKILL);
        kill_deadline_ = std::chrono::steady_clock::time_point::max();
      }
      // Pipes may stay open after exit if a worker's child holds them: do
      // not wait for them then.
      if (all_done && (open_streams_ == 0 || stopping_)) {
        outcome_.all_exited_cleanly = all_clean;
        break;
      }
    }
    outcome_.success = outcome_.failed_rank < 0 && !outcome_.interrupted;
    if (stopping_) {
      outcome_.stop_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - stop_started_).count();
    }
    return outcome_;
  }

 private:
  void StopAll(int signal) {
    for (auto& p : processes_) p->SignalGroup(signal);
  }

  void BeginStop() {
    if (stopping_) return;
    stopping_ = true;
    stop_started_ = std::chrono::steady_clock::now();
    StopAll(SIGTERM);
    // A stopped worker (SIGSTOP, a debugger) takes its SIGTERM only once
    // continued: without this it would sit out the grace period.
    StopAll(SIGCONT);
    kill_deadline_ = std::chrono::steady_clock::now() + options_.grace;
  }

  // One complete line of `s`: to its rank's log; rank 0's stdout to the
  // results, its progress lines to the progress stream and callback.
  void Emit(Stream& s, absl::string_view line) {
    std::FILE* log = logs_[(&s - streams_.data()) / 2].get();
    std::fprintf(log, "[rank %d] %.*s\n", s.rank, static_cast<int>(line.size()), line.data());
    std::fflush(log);
    if (s.rank != 0) return;
    if (s.is_stdout && options_.results != nullptr) {
      std::fwrite(line.data(), 1, line.size(), options_.results);
      std::fputc('\n', options_.results);
      std::fflush(options_.results);
    }
    if (s.is_stdout || !absl::StartsWith(line, kProgressPrefix)) return;
    const absl::string_view progress = line.substr(std::strlen(kProgressPrefix));
    if (options_.progress != nullptr) {
      std::fprintf(options_.progress, "launcher: %.*s\n", static_cast<int>(progress.size()), progress.data());
      std::fflush(options_.progress);
    }
    if (options_.on_progress) options_.on_progress(progress);
  }

  // Waits up to 100 ms for output (or a signal on `signal_fd`) and emits
  // the complete lines read.
  void ReadOutput(int signal_fd) {
    std::vector<pollfd> fds;
    for (const Stream& s : streams_) fds.push_back({s.fd, static_cast<short>(s.fd >= 0 ? POLLIN : 0), 0});
    fds.push_back({signal_fd, POLLIN, 0});
    ::poll(fds.data(), fds.size(), 100);
    for (size_t i = 0; i < streams_.size(); ++i) {
      Stream& s = streams_[i];
      if (s.fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buffer[65536];
      const ssize_t n = read(s.fd, buffer, sizeof buffer);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {
        if (!s.partial.empty()) Emit(s, s.partial);
        s.partial.clear();
        s.fd = -1;  // The Process owns and closes the descriptor.
        --open_streams_;
        continue;
      }
      s.partial.append(buffer, n);
      size_t start = 0, newline;
      while ((newline = s.partial.find('\n', start)) != std::string::npos) {
        Emit(s, absl::string_view(s.partial).substr(start, newline - start));
        start = newline + 1;
      }
      s.partial.erase(0, start);
    }
  }

  // The caller's stop request and SIGINT / SIGTERM: a stop with grace; a
  // second interrupt kills at once.
  void HandleInterrupts(SignalCatcher& signals) {
    if (options_.stop != nullptr && *options_.stop && !stopping_) {
      outcome_.interrupted = true;
      BeginStop();
    }
    if (options_.kill != nullptr && *options_.kill && !killed_) {
      killed_ = true;
      outcome_.interrupted = true;
      StopAll(SIGKILL);
    }
    if (const int received = signals.Drain(); received > 0) {
      outcome_.interrupted = true;
      if (stopping_ || received > 1) {
        StopAll(SIGKILL);
      } else {
        BeginStop();
      }
    }
  }

  // Whether every worker has exited (`all_clean`: each with status 0); the
  // first failure (not after an interrupt) is recorded and stops the rest.
  bool PollExits(bool& all_clean) {
    bool all_done = true;
    for (size_t i = 0; i < processes_.size(); ++i) {
      std::optional<ExitStatus> exit = processes_[i]->Poll();
      if (!exit.has_value()) {
        all_done = false;
        continue;
      }
      all_clean &= exit->success();
      if (!exit->success() && outcome_.failed_rank < 0 && !outcome_.interrupted) {
        outcome_.failed_rank = workers_[i].rank;
        outcome_.failed_exit = *exit;
        outcome_.failed_log = RankLogPath(options_.log_dir, workers_[i].rank);
        if (options_.on_failure) options_.on_failure();
        BeginStop();
      }
    }
    return all_done;
  }

  const std::vector<WorkerLaunch>& workers_;
  const SupervisorOptions& options_;
  std::vector<std::unique_ptr<Process>> processes_;
  std::vector<std::unique_ptr<FILE, int (*)(FILE*)>> logs_;
  std::vector<Stream> streams_;
  size_t open_streams_ = 0;
  JobOutcome outcome_;
  std::chrono::steady_clock::time_point stop_started_;
  bool stopping_ = false;
  bool killed_ = false;
  std::chrono::steady_clock::time_point kill_deadline_ = std::chrono::steady_clock::time_point::max();
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
  SignalCatcher signals(options.catch_signals && options.catch_sigint, options.catch_signals);
  Supervision supervision(workers, options);
  RETURN_IF_ERROR(supervision.Start());
  return supervision.Run(signals);
}

}  // namespace llama
