// //tools:convert_bench: how fast //tools:convert is next to copying the
// same bytes on the same disk, and how much memory it needs.
//
//   /usr/bin/python3 tests/fixtures/checkpoint_fixture.py --bench --out_dir=/data/bench   # ~2.2 GB, once
//   bazel run //tools:convert_bench -- --ckpt_dir=/data/bench/bench_bf16_mp2 --world_size=1
//
// Reads the sources once (so both runs start from the page cache), copies
// them with read/write + fsync and converts them (which also fsyncs), in
// turn, --repeats times, and prints the median GB/s of both and the
// process's peak resident memory.

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <gflags/gflags.h>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "base/progress.h"
#include "base/status_macros.h"
#include "checkpoint/converter.h"
#include "tools/tool_main.h"

DEFINE_string(ckpt_dir, "", "Checkpoint folder to convert (Meta's layout). Required.");
DEFINE_int32(world_size, 1, "Shards to produce.");
DEFINE_string(dtype, "", "Output dtype (bf16, fp16, fp32, int8); default as in the checkpoint.");
DEFINE_int32(repeats, 3, "Runs of each (copy, convert); the median is reported.");
DEFINE_string(scratch_dir, "", "Where to write the copy and the shards; default: next to --ckpt_dir (same disk).");

namespace {

namespace fs = std::filesystem;

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// Copies (or, with `to` empty, only reads) a file; returns bytes moved.
absl::StatusOr<uint64_t> CopyFile(const std::string& from, const std::string& to) {
  const int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return absl::NotFoundError(absl::StrFormat("cannot open %s", from));
  const int out = to.empty() ? -1 : ::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  std::vector<char> buffer(16 << 20);
  uint64_t total = 0;
  ssize_t n;
  while ((n = ::read(in, buffer.data(), buffer.size())) > 0) {
    if (out >= 0 && ::write(out, buffer.data(), n) != n) {
      ::close(in);
      ::close(out);
      return absl::ResourceExhaustedError(absl::StrFormat("write to %s failed", to));
    }
    total += n;
  }
  ::close(in);
  if (out >= 0) {
    ::fsync(out);
    ::close(out);
  }
  return total;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

long PeakRssKb() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

absl::Status Bench() {
  if (FLAGS_ckpt_dir.empty()) return absl::InvalidArgumentError("--ckpt_dir is required");
  const std::string scratch = FLAGS_scratch_dir.empty()
                                  ? fs::path(FLAGS_ckpt_dir).lexically_normal().parent_path().string() +
                                        "/convert_bench_scratch"
                                  : FLAGS_scratch_dir;
  std::error_code error;
  fs::remove_all(scratch, error);
  fs::create_directories(scratch + "/copy", error);
  if (error) return absl::PermissionDeniedError(absl::StrFormat("cannot create %s: %s", scratch, error.message()));

  std::vector<std::string> sources;
  for (const fs::directory_entry& entry : fs::directory_iterator(FLAGS_ckpt_dir, error)) {
    const std::string name = entry.path().filename().string();
    if (absl::EndsWith(name, ".pth") || name == "params.json") sources.push_back(name);
  }
  uint64_t source_bytes = 0;
  for (const std::string& name : sources) {  // Warm the page cache.
    ASSIGN_OR_RETURN(const uint64_t n, CopyFile(FLAGS_ckpt_dir + "/" + name, ""));
    source_bytes += n;
  }
  const long rss_before = PeakRssKb();

  // The disk is shared and noisy, and each run's writeback slows the next:
  // alternate copy and convert and report the median of each.
  std::vector<double> copy_times, convert_times;
  absl::StatusOr<llama::ConvertResult> result;
  for (int repeat = 0; repeat < FLAGS_repeats; ++repeat) {
    auto start = std::chrono::steady_clock::now();
    for (const std::string& name : sources) {
      RETURN_IF_ERROR(CopyFile(FLAGS_ckpt_dir + "/" + name, scratch + "/copy/" + name).status());
    }
    copy_times.push_back(Seconds(start));
    fs::remove_all(scratch + "/shards", error);
    llama::ConvertOptions options;
    options.ckpt_dir = FLAGS_ckpt_dir;
    options.out_dir = scratch + "/shards";
    options.world_size = FLAGS_world_size;
    if (!FLAGS_dtype.empty()) {
      ASSIGN_OR_RETURN(options.dtype, llama::ParseWeightsDtypeFlag("dtype", FLAGS_dtype));
    }
    start = std::chrono::steady_clock::now();
    result = llama::ConvertCheckpoint(options);
    convert_times.push_back(Seconds(start));
    RETURN_IF_ERROR(result.status());
  }
  const long rss_convert = PeakRssKb();
  fs::remove_all(scratch, error);
  const double copy_seconds = Median(copy_times), convert_seconds = Median(convert_times);

  const double copy_rate = source_bytes / copy_seconds / 1e9;
  const double convert_rate = result->bytes_written / convert_seconds / 1e9;
  std::printf("checkpoint:  %s in %zu files (%s)\n", llama::HumanBytes(source_bytes).c_str(), sources.size(),
              FLAGS_ckpt_dir.c_str());
  std::printf("plain copy:  %.2f s, %.2f GB/s (read + write + fsync; median of %d)\n", copy_seconds, copy_rate,
              FLAGS_repeats);
  std::printf("convert:     %.2f s, %.2f GB/s, %s written as %d shard(s) = %.0f%% of copy speed\n",
              convert_seconds, convert_rate, llama::HumanBytes(result->bytes_written).c_str(), FLAGS_world_size,
              100 * convert_rate / copy_rate);
  std::printf("peak RSS:    %.1f MB before converting, %.1f MB after (%.2f%% of the checkpoint)\n",
              rss_before / 1024.0, rss_convert / 1024.0, 100.0 * rss_convert * 1024 / source_bytes);
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  return llama::ToolMain(argc, argv, "convert_bench",
                         "Benchmarks //tools:convert against a plain copy; see the file comment.",
                         [](const std::vector<std::string>&) { return Bench(); });
}
