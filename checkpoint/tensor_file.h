// A weight file read in place: the file is memory-mapped and each tensor is
// a view into the mapping. The one interface of the three formats we read
// (.pth, safetensors, our shards) for callers that want tensors by name.

#ifndef LLAMA_CHECKPOINT_TENSOR_FILE_H_
#define LLAMA_CHECKPOINT_TENSOR_FILE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "base/status_macros.h"
#include "checkpoint/mapped_file.h"
#include "ops/dtype.h"

namespace llama {

// A tensor of a TensorFile. `bytes` points into the file's mapping and is
// valid while the file lives.
struct FileTensor {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  absl::Span<const uint8_t> bytes;  // Row-major, little-endian.
};

// Immutable after the reader has filled it; safe to read from many threads.
class TensorFile {
 public:
  virtual ~TensorFile() = default;
  TensorFile(const TensorFile&) = delete;
  TensorFile& operator=(const TensorFile&) = delete;

  // The path the file was opened from, or the name given to bytes in memory.
  const std::string& path() const { return path_; }
  // In the format's order (see each reader).
  const std::vector<FileTensor>& tensors() const { return tensors_; }
  // The tensor called `name`, or null.
  const FileTensor* Find(absl::string_view name) const;

 protected:
  explicit TensorFile(std::string path) : path_(std::move(path)) {}

  // Readers add each tensor once, after checking that its name is new.
  void AddTensor(FileTensor tensor);
  // Replaces the tensors (a reader that checks them in one order and keeps
  // them in another).
  void SetTensors(std::vector<FileTensor> tensors);

  // Maps `path` and parses it with `Reader::FromBytes(bytes, path)`; the
  // result keeps the mapping its tensors point into.
  template <typename Reader>
  static absl::StatusOr<std::unique_ptr<Reader>> OpenMapped(const std::string& path) {
    ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
    ASSIGN_OR_RETURN(std::unique_ptr<Reader> reader, Reader::FromBytes(file->bytes(), path));
    static_cast<TensorFile&>(*reader).file_ = std::move(file);
    return reader;
  }

 private:
  std::string path_;
  std::unique_ptr<MappedFile> file_;  // Null for bytes parsed in memory.
  std::vector<FileTensor> tensors_;
  absl::flat_hash_map<std::string, size_t> by_name_;  // Index into tensors_.
};

// Number of elements of `shape`, or an error on a negative dimension or
// int64 overflow. `what` names the tensor in the error.
absl::StatusOr<int64_t> NumElements(absl::Span<const int64_t> shape, absl::string_view what);

}  // namespace llama

#endif  // LLAMA_CHECKPOINT_TENSOR_FILE_H_
