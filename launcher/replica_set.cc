#include "launcher/replica_set.h"

#include <poll.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <thread>

#include <glog/logging.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "launcher/signal_catcher.h"

namespace llama {
namespace {

// One replica's life: started, supervised, restarted after a failure.
class ReplicaRunner {
 public:
  ReplicaRunner(int replica, ReplicaDirectory& directory, const ReplicaSetOptions& options,
                const ReplicaStarter& start, const std::atomic<bool>& stop, const std::atomic<bool>& kill,
                std::atomic<bool>& announced)
      : replica_(replica),
        index_(options.first_index + replica),
        directory_(directory),
        options_(options),
        start_(start),
        stop_(stop),
        kill_(kill),
        announced_(announced) {}

  // Until stopped, or failed past --max_restarts (then `last_failure`).
  void Run() {
    int failed_in_a_row = 0;  // Starts that ended before serving.
    for (int start = 0;; ++start) {
      served_ = false;
      const absl::Status ended = RunOnce(start);
      directory_.ReplicaDown(index_);
      if (stop_) return;
      last_failure_ = ended;
      if (start >= options_.max_restarts) {
        std::fprintf(stderr, "launcher: replica %d failed %d time(s), --max_restarts=%d: not started again (%s)\n",
                     index_, start + 1, options_.max_restarts, std::string(ended.message()).c_str());
        return;
      }
      // A replica that served and then failed (a killed rank, a lost GPU) is
      // back after the first back-off; one that fails while loading waits
      // longer each time.
      failed_in_a_row = served_ ? 0 : failed_in_a_row + 1;
      const auto backoff =
          std::min(options_.max_backoff, options_.first_backoff * (1 << std::min(failed_in_a_row, 16)));
      std::fprintf(stderr, "launcher: replica %d is down (%s); restart %d of %d in %.1f s\n", index_,
                   std::string(ended.message()).c_str(), start + 1, options_.max_restarts,
                   std::chrono::duration<double>(backoff).count());
      const auto until = std::chrono::steady_clock::now() + backoff;
      while (!stop_ && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (stop_) return;
    }
  }

  const absl::Status& last_failure() const { return last_failure_; }
  bool clean() const { return clean_; }

 private:
  // One start to its end: why it ended (OK only when stopped and drained).
  absl::Status RunOnce(int start) {
    absl::StatusOr<ReplicaStart> started = start_(replica_);
    if (!started.ok()) return started.status();
    SupervisorOptions supervise = options_.supervise;
    supervise.log_dir = absl::StrFormat("%s/replica%d-start%d", options_.supervise.log_dir, index_, start);
    supervise.catch_signals = false;
    supervise.stop = &stop_;
    supervise.kill = &kill_;
    // Out of routing as soon as a rank fails, not once all have exited.
    supervise.on_failure = [this] { directory_.ReplicaDown(index_); };
    supervise.progress = nullptr;
    supervise.on_progress = [this](absl::string_view line) { Progress(line); };
    absl::StatusOr<JobOutcome> outcome = SuperviseJob(started->launches, supervise);
    if (!outcome.ok()) return outcome.status();
    clean_ = outcome->all_exited_cleanly;
    if (outcome->interrupted && outcome->failed_rank < 0) return absl::OkStatus();
    if (outcome->failed_rank < 0) return absl::InternalError("its ranks exited");
    return absl::InternalError(absl::StrFormat("rank %d %s; its log: %s", outcome->failed_rank,
                                               outcome->failed_exit.Describe(), outcome->failed_log));
  }

  void Progress(absl::string_view line) {
    const int port = ServingPort(line);
    if (port < 0) {
      std::fprintf(stderr, "launcher: replica %d: %.*s\n", index_, static_cast<int>(line.size()), line.data());
      return;
    }
    served_ = true;
    directory_.ReplicaReady(index_, options_.host, port);
    std::fprintf(stderr, "launcher: replica %d is ready on %s:%d\n", index_, options_.host.c_str(), port);
    if (!options_.url.empty() && !announced_.exchange(true)) {
      std::fprintf(stderr, "launcher: serving %s on %s (%s)\n", options_.model.c_str(), options_.url.c_str(),
                   options_.about.c_str());
    }
  }

  const int replica_;  // On this node.
  const int index_;    // Among all nodes'.
  ReplicaDirectory& directory_;
  const ReplicaSetOptions& options_;
  const ReplicaStarter& start_;
  const std::atomic<bool>& stop_;
  const std::atomic<bool>& kill_;
  std::atomic<bool>& announced_;
  absl::Status last_failure_;
  bool clean_ = true;
  std::atomic<bool> served_{false};  // This start's rank 0 said it serves.
};

}  // namespace

int ServingPort(absl::string_view line) {
  if (!absl::StartsWith(line, "serving ")) return -1;
  const size_t url = line.find(" on http://");
  if (url == absl::string_view::npos) return -1;
  const size_t colon = line.find(':', url + 11), end = line.find("/v1", url);
  if (colon == absl::string_view::npos || end == absl::string_view::npos || end < colon) return -1;
  int port = -1;
  return absl::SimpleAtoi(line.substr(colon + 1, end - colon - 1), &port) && port > 0 ? port : -1;
}

absl::Status RunReplicaSet(ReplicaDirectory& directory, const ReplicaSetOptions& options, const ReplicaStarter& start,
                           const std::function<void()>& on_signal) {
  SignalCatcher signals(/*catch_sigint=*/true, /*catch_sigterm=*/true);

  std::atomic<bool> stop{false}, kill{false}, announced{false};
  std::atomic<int> running{options.replicas};
  std::vector<std::unique_ptr<ReplicaRunner>> runners;
  std::vector<std::thread> threads;
  for (int r = 0; r < options.replicas; ++r) {
    runners.push_back(std::make_unique<ReplicaRunner>(r, directory, options, start, stop, kill, announced));
    // A worker dies with the thread that started it (PR_SET_PDEATHSIG):
    // this thread outlives its replica's workers.
    threads.emplace_back([&running, runner = runners.back().get()] {
      runner->Run();
      --running;
    });
  }
  std::chrono::steady_clock::time_point signal_time;
  bool interrupted = false, said_alone = false;
  while (running > 0 || (options.wait_for_signal && !interrupted)) {
    if (running == 0 && !said_alone) {
      said_alone = true;
      std::fprintf(stderr, "launcher: this node's replicas are past --max_restarts; the front end serves with the "
                           "other nodes' until a signal\n");
    }
    pollfd fd = {signals.fd(), POLLIN, 0};
    ::poll(&fd, 1, 100);
    int received = signals.Drain();
    if (options.stop_when != nullptr && *options.stop_when && !interrupted) received = 1;
    if (received == 0) continue;
    if (interrupted || received > 1) {  // A second interrupt: at once.
      std::fprintf(stderr, "launcher: killing every replica's workers\n");
      kill = true;
    }
    if (!interrupted) {
      interrupted = true;
      signal_time = std::chrono::steady_clock::now();
      std::fprintf(stderr, "launcher: stopping: every replica drains its answers in flight (again to kill them)\n");
      if (on_signal) on_signal();
      stop = true;
    }
  }
  for (std::thread& t : threads) t.join();
  if (interrupted) {
    bool clean = true;
    for (const auto& runner : runners) clean &= runner->clean();
    std::fprintf(stderr, "launcher: the replicas drained and stopped %.1f s after the signal%s; logs in %s\n",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - signal_time).count(),
                 clean ? "" : " (some ranks did not exit cleanly)", options.supervise.log_dir.c_str());
    return absl::OkStatus();
  }
  std::string failure;
  for (const auto& runner : runners) {
    if (!runner->last_failure().ok()) failure = std::string(runner->last_failure().message());
  }
  return absl::InternalError(absl::StrFormat("no replica is left (each failed past --max_restarts=%d); one: %s",
                                             options.max_restarts, failure));
}

}  // namespace llama
