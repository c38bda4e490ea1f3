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
#include <utility>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "checkpoint/tensor_file.h"

namespace llama {

// Tensors in the order of the pickled state dict.
class PthFile : public TensorFile {
 public:
  static absl::StatusOr<std::unique_ptr<PthFile>> Open(const std::string& path);

  // Parses an archive already in memory (fuzzing, tests). `bytes` must
  // outlive the result.
  static absl::StatusOr<std::unique_ptr<PthFile>> FromBytes(absl::Span<const uint8_t> bytes,
                                                            const std::string& source);

 private:
  explicit PthFile(std::string path) : TensorFile(std::move(path)) {}
};

}  // namespace llama

#endif  // LLAMA_CHECKPOINT_PTH_READER_H_
