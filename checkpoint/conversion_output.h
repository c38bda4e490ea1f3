// What a conversion does to its output folder besides writing shards: the
// lock that lets one conversion at a time write there, the free-space
// check before writing, and replacing a folder only if it holds shards.
// Internal to //checkpoint (converter.cc).

#ifndef LLAMA_CHECKPOINT_CONVERSION_OUTPUT_H_
#define LLAMA_CHECKPOINT_CONVERSION_OUTPUT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/file_lock.h"

namespace llama {

// "<out_dir>.lock", beside the output.
std::string ConversionLockPath(const std::string& out_dir);

// Waits for and takes the output's lock (its folder made if missing),
// saying whom it waits for when `show_progress`.
absl::StatusOr<FileLock> LockConversionOutput(const std::string& out_dir, bool show_progress);

// Removes `dir` only if it holds nothing but shard files (or is missing).
absl::Status RemoveShardFolder(const std::string& dir);

// Checked before writing anything: a conversion that fills the disk fails
// late, after minutes, and may starve other writers on the same storage.
// `path` is on the filesystem that will hold `needed` bytes of `what`;
// `shown` names the place.
absl::Status CheckFreeSpace(const std::string& path, const std::string& shown, uint64_t needed, const char* what);

}  // namespace llama

#endif  // LLAMA_CHECKPOINT_CONVERSION_OUTPUT_H_
