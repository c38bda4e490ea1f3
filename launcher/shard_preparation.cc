#include "launcher/shard_preparation.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_format.h"
#include "checkpoint/file_util.h"
#include "ops/status_macros.h"

namespace llama {
namespace {

namespace fs = std::filesystem;

// The failure node 0 recorded during this attempt: markers older than our
// own start are from an earlier run and are ignored (node 0 removes them
// when it starts, but may start after us).
absl::StatusOr<std::string> FreshFailure(const std::string& marker, fs::file_time_type since) {
  std::error_code error;
  const fs::file_time_type written = fs::last_write_time(marker, error);
  if (error || written < since) return absl::NotFoundError("no failure recorded");
  std::ifstream in(marker);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<ConvertResult> WaitForNodeZero(const ShardPreparation& p) {
  ConvertOptions check = p.convert;
  check.check_only = true;
  check.show_progress = false;
  const std::string marker = FailureMarkerPath(p.convert.out_dir);
  const auto start = std::chrono::steady_clock::now();
  // A little slack: the filesystem's clock and ours may disagree slightly.
  const fs::file_time_type since = fs::file_time_type::clock::now() - std::chrono::seconds(2);
  auto next_report = start;
  while (true) {
    absl::StatusOr<ConvertResult> done = ConvertCheckpoint(check);
    if (done.ok() && done->up_to_date) return done;
    if (!done.ok() && done.status().code() != absl::StatusCode::kNotFound) return done.status();
    if (absl::StatusOr<std::string> failure = FreshFailure(marker, since); failure.ok()) {
      return absl::AbortedError(absl::StrFormat("node 0 could not convert the checkpoint: %s", *failure));
    }
    const auto now = std::chrono::steady_clock::now();
    const auto waited = std::chrono::duration_cast<std::chrono::seconds>(now - start);
    if (waited >= p.deadline) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "node %d of %d: %s is still not a complete conversion after %d s; node 0 converts it (is its launcher "
          "running, and does this node see the same storage?). Raise the wait with --rendezvous_timeout",
          p.node_rank, p.nnodes, p.convert.out_dir, waited.count()));
    }
    if (now >= next_report) {
      std::fprintf(stderr, "launcher: node %d waiting for node 0 to convert the checkpoint into %s (%lld s)\n",
                   p.node_rank, p.convert.out_dir.c_str(), static_cast<long long>(waited.count()));
      next_report = now + std::chrono::seconds(10);
    }
    std::this_thread::sleep_for(p.poll);
  }
}

}  // namespace

std::string FailureMarkerPath(const std::string& shard_dir) {
  return fs::path(shard_dir).lexically_normal().string() + ".failed";
}

absl::StatusOr<ConvertResult> PrepareShards(const ShardPreparation& p) {
  if (p.node_rank > 0) return WaitForNodeZero(p);
  const std::string marker = FailureMarkerPath(p.convert.out_dir);
  std::error_code ignored;
  fs::remove(marker, ignored);
  absl::StatusOr<ConvertResult> converted = ConvertCheckpoint(p.convert);
  if (!converted.ok() && p.nnodes > 1) {
    // Best effort: the other nodes stop at once instead of at their deadline
    // (written whole, then renamed, so they never read half a message).
    const std::string temp = marker + ".partial";
    std::ofstream(temp) << converted.status().message() << "\n";
    RenameDurably(temp, marker).IgnoreError();
  }
  return converted;
}

}  // namespace llama
