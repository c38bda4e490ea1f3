#include "checkpoint/conversion_output.h"

#include <sys/statvfs.h>

#include <cstdio>
#include <filesystem>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "base/progress.h"

namespace llama {

namespace fs = std::filesystem;

std::string ConversionLockPath(const std::string& out_dir) {
  return fs::path(out_dir).lexically_normal().string() + ".lock";
}

absl::StatusOr<FileLock> LockConversionOutput(const std::string& out_dir, bool show_progress) {
  const std::string lock = ConversionLockPath(out_dir);
  std::error_code error;
  fs::create_directories(fs::path(lock).parent_path(), error);
  return FileLock::Acquire(lock, [&](const std::string& holder) {
    if (!show_progress) return;
    std::fprintf(stderr, "convert: %s is being written by another conversion (%s); waiting for it\n",
                 out_dir.c_str(), holder.c_str());
  });
}

absl::Status RemoveShardFolder(const std::string& dir) {
  std::error_code error;
  if (!fs::exists(dir, error)) return absl::OkStatus();
  if (!fs::is_directory(dir, error)) {
    return absl::FailedPreconditionError(
        absl::StrFormat("refusing to replace \"%s\": it is a file, not a folder of shards", dir));
  }
  std::vector<fs::path> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (!absl::StartsWith(name, "rank-") ||
        !(absl::EndsWith(name, ".shard") || absl::EndsWith(name, ".shard.tmp"))) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "refusing to replace \"%s\": it holds \"%s\", which convert did not write", dir, name));
    }
    files.push_back(entry.path());
  }
  for (const fs::path& file : files) fs::remove(file, error);
  if (!fs::remove(dir, error) || error) {
    return absl::InternalError(absl::StrFormat("cannot remove \"%s\": %s", dir, error.message()));
  }
  return absl::OkStatus();
}

absl::Status CheckFreeSpace(const std::string& path, const std::string& shown, uint64_t needed, const char* what) {
  struct statvfs info;
  if (::statvfs(path.c_str(), &info) != 0) return absl::OkStatus();  // Unknown: let the writes tell.
  const uint64_t free = static_cast<uint64_t>(info.f_bavail) * info.f_frsize;
  if (free >= needed) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrFormat("not enough free space for the %s in \"%s\": %s needed, %s is free; free some or choose "
                      "another folder",
                      what, shown, HumanBytes(needed), HumanBytes(free)));
}

}  // namespace llama
