#include "checkpoint/gguf_writer.h"

#include <cstring>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "checkpoint/tensor_file.h"

namespace llama {
namespace {

// gguf_metadata_value_type.
enum GgufValueType : uint32_t {
  kInt32 = 5,
  kUint32 = 4,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
};

template <typename T>
void Put(std::string* out, T value) {
  char bytes[sizeof value];
  std::memcpy(bytes, &value, sizeof value);  // x86-64 and aarch64 are little-endian, as GGUF is.
  out->append(bytes, sizeof value);
}

void PutString(std::string* out, const std::string& value) {
  Put<uint64_t>(out, value.size());
  out->append(value);
}

uint64_t RoundUp(uint64_t n, uint64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

}  // namespace

absl::StatusOr<uint32_t> GgmlTypeOf(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 0;  // GGML_TYPE_F32
    case DType::kF16:
      return 1;  // GGML_TYPE_F16
    case DType::kBF16:
      return 30;  // GGML_TYPE_BF16
    case DType::kQ8_0:
      return 8;  // GGML_TYPE_Q8_0: the same block layout.
    case DType::kQ4_K:
      return 12;  // GGML_TYPE_Q4_K: the same block layout.
    case DType::kQ6_K:
      return 14;  // GGML_TYPE_Q6_K: the same block layout.
    default:
      return absl::InvalidArgumentError(absl::StrFormat(
          "GGUF export: %s tensors are not supported (f32, f16, bf16, q8_0, q4_k or q6_k)", DTypeName(dtype)));
  }
}

void GgufMetadata::Key(const std::string& key, uint32_t type) {
  ++count_;
  PutString(&bytes_, key);
  Put<uint32_t>(&bytes_, type);
}

void GgufMetadata::AddString(const std::string& key, const std::string& value) {
  Key(key, kString);
  PutString(&bytes_, value);
}

void GgufMetadata::AddU32(const std::string& key, uint32_t value) {
  Key(key, kUint32);
  Put(&bytes_, value);
}

void GgufMetadata::AddF32(const std::string& key, float value) {
  Key(key, kFloat32);
  Put(&bytes_, value);
}

void GgufMetadata::AddBool(const std::string& key, bool value) {
  Key(key, kBool);
  Put<uint8_t>(&bytes_, value ? 1 : 0);
}

void GgufMetadata::AddStringArray(const std::string& key, const std::vector<std::string>& values) {
  Key(key, kArray);
  Put<uint32_t>(&bytes_, kString);
  Put<uint64_t>(&bytes_, values.size());
  for (const std::string& v : values) PutString(&bytes_, v);
}

void GgufMetadata::AddF32Array(const std::string& key, const std::vector<float>& values) {
  Key(key, kArray);
  Put<uint32_t>(&bytes_, kFloat32);
  Put<uint64_t>(&bytes_, values.size());
  for (float v : values) Put(&bytes_, v);
}

void GgufMetadata::AddI32Array(const std::string& key, const std::vector<int32_t>& values) {
  Key(key, kArray);
  Put<uint32_t>(&bytes_, kInt32);
  Put<uint64_t>(&bytes_, values.size());
  for (int32_t v : values) Put(&bytes_, v);
}

GgufWriter::GgufWriter(std::unique_ptr<StagedFile> file, std::vector<GgufTensor> tensors, std::vector<uint64_t> sizes)
    : file_(std::move(file)), tensors_(std::move(tensors)), sizes_(std::move(sizes)) {}

absl::StatusOr<std::unique_ptr<GgufWriter>> GgufWriter::Create(const std::string& path, const GgufMetadata& metadata,
                                                               std::vector<GgufTensor> tensors) {
  std::string header = "GGUF";
  Put<uint32_t>(&header, kGgufVersion);
  Put<uint64_t>(&header, tensors.size());
  Put<uint64_t>(&header, metadata.count());
  header += metadata.bytes();
  std::vector<uint64_t> sizes;
  uint64_t offset = 0;
  for (const GgufTensor& t : tensors) {
    ASSIGN_OR_RETURN(const uint32_t type, GgmlTypeOf(t.dtype));
    ASSIGN_OR_RETURN(const int64_t numel, NumElements(t.shape, t.name));
    PutString(&header, t.name);
    Put<uint32_t>(&header, t.shape.size());
    for (auto dim = t.shape.rbegin(); dim != t.shape.rend(); ++dim) Put<uint64_t>(&header, *dim);  // Innermost first.
    Put<uint32_t>(&header, type);
    Put<uint64_t>(&header, offset);
    sizes.push_back(TensorBytes(t.dtype, numel));
    offset = RoundUp(offset + sizes.back(), kGgufAlignment);
  }
  ASSIGN_OR_RETURN(std::unique_ptr<StagedFile> file, StagedFile::Create(path, ".partial"));
  RETURN_IF_ERROR(file->Write(header.data(), header.size()));
  RETURN_IF_ERROR(file->PadTo(RoundUp(file->position(), kGgufAlignment)));
  auto writer = std::unique_ptr<GgufWriter>(new GgufWriter(std::move(file), std::move(tensors), std::move(sizes)));
  writer->data_start_ = writer->file_->position();
  return writer;
}

absl::Status GgufWriter::Append(absl::Span<const uint8_t> bytes) {
  while (!bytes.empty()) {
    if (current_ == tensors_.size()) {
      return absl::InternalError(
          absl::StrFormat("%s: %d bytes appended after the last tensor", file_->partial_path(), bytes.size()));
    }
    if (written_ == 0) {  // A tensor starts at its aligned offset.
      RETURN_IF_ERROR(file_->PadTo(RoundUp(file_->position() - data_start_, kGgufAlignment) + data_start_));
    }
    const size_t n = std::min<uint64_t>(bytes.size(), sizes_[current_] - written_);
    RETURN_IF_ERROR(file_->Write(bytes.data(), n));
    bytes.remove_prefix(n);
    written_ += n;
    if (written_ == sizes_[current_]) {
      ++current_;
      written_ = 0;
    }
  }
  return absl::OkStatus();
}

absl::Status GgufWriter::Finish() {
  // Zero-sized tensors at the end never see an Append.
  while (current_ < tensors_.size() && sizes_[current_] == 0) ++current_;
  if (current_ != tensors_.size()) {
    return absl::InternalError(absl::StrFormat("%s: tensor \"%s\" is missing %d bytes", file_->partial_path(),
                                               tensors_[current_].name, sizes_[current_] - written_));
  }
  return file_->Commit();
}

}  // namespace llama
