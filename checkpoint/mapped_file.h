// A whole file mapped read-only into memory.
//
// Checkpoints are read through mappings, never copied: a 17 GB shard costs
// page cache, not heap, and pages that are never touched are never read.

#ifndef LLAMA_CHECKPOINT_MAPPED_FILE_H_
#define LLAMA_CHECKPOINT_MAPPED_FILE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace llama {

// Immutable after Open; safe to read from many threads. Unmaps on destruction.
class MappedFile {
 public:
  // Maps `path` read-only. An empty file maps to an empty span.
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  absl::Span<const uint8_t> bytes() const { return {data_, size_}; }

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}

  std::string path_;
  const uint8_t* data_;
  size_t size_;
};

}  // namespace llama

#endif  // LLAMA_CHECKPOINT_MAPPED_FILE_H_
