// Reads a GGUF file's header (ggml docs/gguf.md, versions 2 and 3; the
// layout is drawn in gguf_writer.h): the metadata and every tensor's name,
// ggml type, shape and place (tools/inspect, the GGUF import). Tensor bytes
// stay in the mapping; ggml's block types have no DType of ours, so this is
// not a TensorFile (ops/ggml_blocks.h decodes them).
//
// Nothing in the file is trusted: every count and length is checked
// against the bytes left before anything is allocated, arrays nest at most
// kMaxGgufArrayDepth deep, keys and tensor names must be unique, and each
// tensor of a type whose size is known must lie inside the file. Errors
// name the file and the byte offset, key or tensor.

#ifndef LLAMA_CHECKPOINT_GGUF_READER_H_
#define LLAMA_CHECKPOINT_GGUF_READER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "checkpoint/mapped_file.h"
#include "ops/ggml_blocks.h"  // GgmlTypeName, for readers of the tensor list.

namespace llama {

// Arrays of arrays are allowed by the format; no real file nests deeper.
inline constexpr int kMaxGgufArrayDepth = 4;

struct GgufTensorInfo {
  std::string name;
  uint32_t ggml_type = 0;
  std::vector<int64_t> shape;  // Row-major (outermost first), as everywhere here; the file stores it reversed.
  uint64_t offset = 0;         // In the data section.
};

class GgufFile {
 public:
  // Maps `path` and reads its header.
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // Reads the header of a file already in memory (tests); `source` names it.
  static absl::StatusOr<std::unique_ptr<GgufFile>> FromBytes(absl::Span<const uint8_t> bytes,
                                                             const std::string& source);

  uint32_t version() const { return version_; }
  // In file order: each key with its value (numbers, booleans, strings,
  // arrays as JSON arrays).
  const std::vector<std::pair<std::string, nlohmann::json>>& metadata() const { return metadata_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  uint64_t data_offset() const { return data_offset_; }  // Where the data section starts in the file.
  // A tensor's bytes (one of tensors(), of a type ggml_blocks.h knows;
  // empty for another type).
  absl::Span<const uint8_t> TensorData(const GgufTensorInfo& info) const;

 private:
  GgufFile() = default;

  std::unique_ptr<MappedFile> file_;  // Null for bytes in memory.
  uint32_t version_ = 0;
  std::vector<std::pair<std::string, nlohmann::json>> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  uint64_t data_offset_ = 0;
  absl::Span<const uint8_t> bytes_;  // The whole file.
};

}  // namespace llama

#endif  // LLAMA_CHECKPOINT_GGUF_READER_H_
