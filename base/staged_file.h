// A file written under "<path><suffix>" and renamed to `path` only when
// complete and on disk (fsync, rename, fsync of the folder): readers see
// the whole file or none. Dropped before Commit, the partial file is
// removed. What the shard and GGUF writers are built on.

#ifndef LLAMA_BASE_STAGED_FILE_H_
#define LLAMA_BASE_STAGED_FILE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace llama {

class StagedFile {
 public:
  static absl::StatusOr<std::unique_ptr<StagedFile>> Create(const std::string& path, const std::string& suffix);
  ~StagedFile();
  StagedFile(const StagedFile&) = delete;
  StagedFile& operator=(const StagedFile&) = delete;

  // Appends; errors (a full disk) name the file.
  absl::Status Write(const void* data, size_t size);
  // Appends zeros up to `offset`.
  absl::Status PadTo(uint64_t offset);
  // Overwrites bytes already written (a header filled in last).
  absl::Status WriteAt(uint64_t offset, const void* data, size_t size);
  // Bytes written so far.
  uint64_t position() const { return position_; }
  const std::string& partial_path() const { return partial_path_; }

  absl::Status Commit();

 private:
  StagedFile(std::string path, std::string partial_path, int fd)
      : path_(std::move(path)), partial_path_(std::move(partial_path)), fd_(fd) {}

  std::string path_;
  std::string partial_path_;
  int fd_;
  uint64_t position_ = 0;
  bool committed_ = false;
};

}  // namespace llama

#endif  // LLAMA_BASE_STAGED_FILE_H_
