// Runs a node's worker processes to completion, or stops them all:
//
// - each rank's stdout and stderr go, line by line and prefixed with
//   "[rank R] ", to <log_dir>/rank<R>.log; rank 0's stdout also goes to the
//   launcher's stdout unchanged (the job's results), and rank 0's progress
//   lines (worker/results.h's kProgressPrefix) to the launcher's stderr;
// - when a worker exits non-zero or by a signal, the others get SIGTERM and,
//   after the grace period, SIGKILL; the outcome names the first failure;
// - SIGINT / SIGTERM to the launcher stop every worker the same way; a
//   second one kills them at once.
// Workers run in their own process groups and die with the launcher
// (base/process.h), so none outlives it.

#ifndef LLAMA_LAUNCHER_SUPERVISOR_H_
#define LLAMA_LAUNCHER_SUPERVISOR_H_

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/process.h"

namespace llama {

struct WorkerLaunch {
  int rank = 0;
  ProcessOptions process;  // capture_output is forced on.
};

struct SupervisorOptions {
  std::string log_dir;
  std::chrono::milliseconds grace{std::chrono::seconds(5)};
  FILE* results = stdout;  // Where rank 0's stdout goes.
  FILE* progress = stderr;  // Where rank 0's progress lines go ("launcher: 8/100 prompts done, ...").
  // Also called, from the supervision loop, with each rank-0 progress line.
  std::function<void(absl::string_view line)> on_progress;
  // Interactive use (launcher chat): SIGINT belongs to the caller (it stops
  // an answer, not the job), and the caller ends the job by setting *stop
  // (seen within 100 ms; the outcome then counts as interrupted).
  bool catch_sigint = true;
  // false: neither SIGINT nor SIGTERM is caught here; the caller, which
  // supervises several jobs at once (launcher serve's replicas), takes
  // them and stops each job through *stop.
  bool catch_signals = true;
  const std::atomic<bool>* stop = nullptr;
  // Set: every worker is killed at once (a second interrupt).
  const std::atomic<bool>* kill = nullptr;
  // Called once, from the supervision loop, when the first worker fails
  // (before the others are stopped).
  std::function<void()> on_failure;
};

struct JobOutcome {
  bool success = false;
  bool interrupted = false;  // Stopped by SIGINT / SIGTERM.
  int failed_rank = -1;      // The first rank that failed, if any.
  ExitStatus failed_exit;
  std::string failed_log;
  bool all_exited_cleanly = false;  // Every worker exited with status 0 (a drained server, stopped by a signal).
  double stop_seconds = 0;  // Interrupted: from the stop request to the last worker's exit (a server's drain).
};

absl::StatusOr<JobOutcome> SuperviseJob(const std::vector<WorkerLaunch>& workers, const SupervisorOptions& options);

// "<log_dir>/rank<R>.log".
std::string RankLogPath(const std::string& log_dir, int rank);

}  // namespace llama

#endif  // LLAMA_LAUNCHER_SUPERVISOR_H_
