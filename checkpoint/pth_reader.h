// Reads PyTorch .pth checkpoints (torch.save's zip format) without Python,
// without executing pickled code, and without copying tensor bytes: the file
// is memory-mapped and every tensor is a view into the mapping.
//
// Accepted: a state dict of contiguous tensors (see torch_unpickler.h).
// Rejected with a message saying what to do: the pre-1.6 non-zip format,
// non-contiguous tensors, big-endian files, and anything whose offsets or
// sizes do not fit inside the file.

#ifndef LLAMA_CHECKPOINT_PTH_READER_H_
#define LLAMA_CHECKPOINT_PTH_READER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "checkpoint/mapped_file.h"
#include "ops/dtype.h"

namespace llama {

// A tensor of a .pth file. `bytes` points into the file's mapping and is
// valid while the PthFile lives.
struct PthTensor {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  absl::Span<const uint8_t> bytes;  // Row-major, little-endian.
};

// Immutable after Open; safe to read from many threads.
class PthFile {
 public:
  static absl::StatusOr<std::unique_ptr<PthFile>> Open(const std::string& path);

  // Parses an archive already in memory (fuzzing, tests). `bytes` must
  // outlive the result.
  static absl::StatusOr<std::unique_ptr<PthFile>> FromBytes(absl::Span<const uint8_t> bytes,
                                                            const std::string& source);

  const std::string& path() const { return path_; }
  // In the order of the pickled state dict.
  const std::vector<PthTensor>& tensors() const { return tensors_; }
  // The tensor called `name`, or null.
  const PthTensor* Find(absl::string_view name) const;

 private:
  PthFile() = default;

  std::string path_;
  std::unique_ptr<MappedFile> file_;
  std::vector<PthTensor> tensors_;
};

// Number of elements of `shape`, or an error on a negative dimension or
// int64 overflow. `what` names the tensor in the error.
absl::StatusOr<int64_t> NumElements(absl::Span<const int64_t> shape, absl::string_view what);

}  // namespace llama

#endif  // LLAMA_CHECKPOINT_PTH_READER_H_
