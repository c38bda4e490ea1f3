// Writes GGUF files (ggml's format, read by llama.cpp and Ollama), as its
// specification (ggml docs/gguf.md, version 3) lays them out:
//
//   "GGUF", u32 version 3, u64 tensor count, u64 metadata count
//   metadata: (string key, u32 value type, value)...
//   tensor infos: (string name, u32 n_dims, u64 dims[n_dims] innermost
//                  first, u32 ggml type, u64 offset in the data section)...
//   zero padding to the alignment, then the data section: each tensor at
//   a multiple of the alignment.
//
// Strings are a u64 byte length and the bytes; everything little-endian.
// The tensor list is known up front, so the header with every offset is
// written first and the bytes are streamed after it; the file appears only
// when complete ("<path>.partial", renamed at Finish).

#ifndef LLAMA_CHECKPOINT_GGUF_WRITER_H_
#define LLAMA_CHECKPOINT_GGUF_WRITER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/staged_file.h"
#include "ops/dtype.h"

namespace llama {

inline constexpr uint32_t kGgufVersion = 3;
inline constexpr uint64_t kGgufAlignment = 32;  // The format's default (general.alignment).

// ggml's type numbers for the element types we write.
absl::StatusOr<uint32_t> GgmlTypeOf(DType dtype);

// Metadata in insertion order, serialized as it is added.
class GgufMetadata {
 public:
  void AddString(const std::string& key, const std::string& value);
  void AddU32(const std::string& key, uint32_t value);
  void AddF32(const std::string& key, float value);
  void AddBool(const std::string& key, bool value);
  void AddStringArray(const std::string& key, const std::vector<std::string>& values);
  void AddF32Array(const std::string& key, const std::vector<float>& values);
  void AddI32Array(const std::string& key, const std::vector<int32_t>& values);

  uint64_t count() const { return count_; }
  const std::string& bytes() const { return bytes_; }

 private:
  void Key(const std::string& key, uint32_t type);

  uint64_t count_ = 0;
  std::string bytes_;
};

struct GgufTensor {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;  // Row-major, as everywhere else here.
};

class GgufWriter {
 public:
  // Writes the header for `tensors`, whose bytes must then be appended in
  // this order, each exactly its size.
  static absl::StatusOr<std::unique_ptr<GgufWriter>> Create(const std::string& path, const GgufMetadata& metadata,
                                                            std::vector<GgufTensor> tensors);
  // Dropped before Finish succeeds, the partial file is removed.
  GgufWriter(const GgufWriter&) = delete;
  GgufWriter& operator=(const GgufWriter&) = delete;

  absl::Status Append(absl::Span<const uint8_t> bytes);
  // Checks every tensor got its bytes, then makes the file durable and
  // renames it into place.
  absl::Status Finish();

 private:
  GgufWriter(std::unique_ptr<StagedFile> file, std::vector<GgufTensor> tensors, std::vector<uint64_t> sizes);

  std::unique_ptr<StagedFile> file_;
  std::vector<GgufTensor> tensors_;
  std::vector<uint64_t> sizes_;
  uint64_t data_start_ = 0;  // File offset of the data section.
  size_t current_ = 0;       // The tensor being appended.
  uint64_t written_ = 0;     // Of the current tensor.
};

}  // namespace llama

#endif  // LLAMA_CHECKPOINT_GGUF_WRITER_H_
