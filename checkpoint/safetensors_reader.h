// Reads .safetensors files (Hugging Face's tensor format) without copying
// tensor bytes: the file is memory-mapped and every tensor is a view.
//
// Format: an unsigned 64-bit little-endian header size N, N bytes of JSON
//   {"<tensor>": {"dtype": "BF16", "shape": [4096, 4096],
//                 "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"<key>": "<string>", ...}}
// and the data section, to which the offsets are relative.
//
// Nothing in the file is trusted: the header is capped (as the format's own
// library caps it), every entry's fields are type-checked, each tensor's
// byte length must equal its shape times its element size, and the tensors
// must tile the data section exactly (no overlap, no gap, nothing past the
// end). Errors name the file, the tensor and the problem.

#ifndef LLAMA_CHECKPOINT_SAFETENSORS_READER_H_
#define LLAMA_CHECKPOINT_SAFETENSORS_READER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "checkpoint/tensor_file.h"

namespace llama {

// The largest header accepted (the safetensors library's limit).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

// Tensors by data offset.
class SafetensorsFile : public TensorFile {
 public:
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);

  // Parses a file already in memory (fuzzing, tests). `bytes` must outlive
  // the result; `source` names it in errors.
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> FromBytes(absl::Span<const uint8_t> bytes,
                                                                    const std::string& source);

  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  explicit SafetensorsFile(std::string path) : TensorFile(std::move(path)) {}

  std::map<std::string, std::string> metadata_;
};

}  // namespace llama

#endif  // LLAMA_CHECKPOINT_SAFETENSORS_READER_H_
