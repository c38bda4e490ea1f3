#include "launcher/shard_preparation.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/durable_file.h"
#include "base/status_macros.h"
#include "xxhash.h"

namespace llama {
namespace {

namespace fs = std::filesystem;

// Names the job in the failure marker without writing its secret.
std::string JobMark(const std::string& token) {
  return absl::StrFormat("job %016x", XXH3_64bits(token.data(), token.size()));
}

// The failure node 0 recorded for this job, if any.
absl::StatusOr<std::string> JobFailure(const std::string& marker, const std::string& job) {
  std::ifstream in(marker);
  std::string first;
  if (!std::getline(in, first) || first != job) return absl::NotFoundError("no failure recorded for this job");
  std::stringstream rest;
  rest << in.rdbuf();
  std::string text = rest.str();
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

}  // namespace

absl::StatusOr<ShardLocation> ChooseShardDir(const ConvertOptions& convert, const std::string& cache_root) {
  std::error_code error;
  const fs::path ckpt = fs::weakly_canonical(fs::absolute(convert.ckpt_dir), error);
  if (!convert.dtype.has_value() && HoldsShardsFor(ckpt.string(), convert.world_size)) {
    return ShardLocation{ckpt.string(), "", /*as_is=*/true};
  }
  // A converted type has its own folder: converting tp2 to int8 must not
  // replace the bf16 shards another job uses.
  const std::string tp = absl::StrCat("tp", convert.world_size,
                                      convert.dtype.has_value() ? absl::StrCat("-", DTypeName(*convert.dtype)) : "");
  // A checkpoint that is one file (GGUF) has its shards beside it.
  const fs::path shards = fs::is_regular_file(ckpt, error) ? fs::path(ckpt.string() + ".shards") : ckpt / "shards";
  ShardLocation next_to_checkpoint{(shards / tp).string(), ""};
  if (ProbeWritableFolder(shards.string()).ok()) return next_to_checkpoint;
  ConvertOptions check = convert;
  check.out_dir = next_to_checkpoint.dir;
  check.check_only = true;
  check.show_progress = false;
  check.verify_checklist = false;
  if (absl::StatusOr<ConvertResult> done = ConvertCheckpoint(check); done.ok() && done->up_to_date) {
    return next_to_checkpoint;  // Converted earlier by someone who could write there.
  }
  const std::string path = ckpt.string();
  const fs::path cache = fs::path(cache_root) /
                         absl::StrFormat("%s-%016x", ckpt.filename().string(), XXH3_64bits(path.data(), path.size())) / tp;
  return ShardLocation{cache.string(), absl::StrFormat("%s is not writable (read-only storage?): shards go to %s",
                                                       path, cache.string())};
}

namespace {

// The bytes node 0's conversion has staged so far (converter.h: shards are
// written into "<out_dir>.partial").
int64_t StagedBytes(const std::string& out_dir) {
  std::error_code error;
  int64_t bytes = 0;
  for (fs::directory_iterator it(out_dir + ".partial", error), end; !error && it != end; it.increment(error)) {
    const uintmax_t size = it->file_size(error);
    if (!error) bytes += static_cast<int64_t>(size);
    error.clear();
  }
  return bytes;
}

// Waits while node 0 converts: as long as its staged shards grow, and up to
// `deadline` without growth (a 70B conversion takes far longer than any
// fixed limit, a dead node 0 should not hold the job that long).
absl::StatusOr<ConvertResult> WaitForNodeZero(const ShardPreparation& p) {
  ConvertOptions check = p.convert;
  check.check_only = true;
  check.show_progress = false;
  const std::string marker = FailureMarkerPath(p.convert.out_dir);
  const auto start = std::chrono::steady_clock::now();
  auto next_report = start;
  auto last_progress = start;
  int64_t staged = StagedBytes(p.convert.out_dir);
  while (true) {
    absl::StatusOr<ConvertResult> done = ConvertCheckpoint(check);
    if (done.ok() && done->up_to_date) return done;
    if (!done.ok() && done.status().code() != absl::StatusCode::kNotFound) return done.status();
    if (absl::StatusOr<std::string> failure = JobFailure(marker, JobMark(p.job_token)); failure.ok()) {
      return absl::AbortedError(absl::StrFormat("node 0 could not convert the checkpoint: %s", *failure));
    }
    const auto now = std::chrono::steady_clock::now();
    // Progress: the staged shards grow, or node 0 still holds the lock it
    // takes before checking checklist.chk (minutes for 70B, writing nothing).
    if (const int64_t bytes = StagedBytes(p.convert.out_dir); bytes != staged || ConversionUnderWay(p.convert.out_dir)) {
      staged = bytes;
      last_progress = now;
    }
    const auto waited = std::chrono::duration_cast<std::chrono::seconds>(now - start);
    const auto stalled = std::chrono::duration_cast<std::chrono::seconds>(now - last_progress);
    if (stalled >= p.deadline) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "node %d of %d: %s is still not a complete conversion after %d s, with no progress for the last %d s; "
          "node 0 converts it (is its launcher running, and does this node see the same storage?). Raise the wait "
          "with --rendezvous_timeout",
          p.node_rank, p.nnodes, p.convert.out_dir, waited.count(), stalled.count()));
    }
    if (now >= next_report) {
      std::fprintf(stderr,
                   "launcher: node %d waiting for node 0 to convert the checkpoint into %s (%lld s, %.2f GB staged)\n",
                   p.node_rank, p.convert.out_dir.c_str(), static_cast<long long>(waited.count()), staged / 1e9);
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
    std::ofstream(temp) << JobMark(p.job_token) << "\n" << converted.status().message() << "\n";
    RenameDurably(temp, marker).IgnoreError();
  }
  return converted;
}

}  // namespace llama
