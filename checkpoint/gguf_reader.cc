#include "checkpoint/gguf_reader.h"

#include <cstring>
#include <iterator>
#include <set>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "checkpoint/gguf_writer.h"
#include "ops/ggml_blocks.h"

namespace llama {
namespace {

// gguf_metadata_value_type: the fixed sizes of types 0-7 and 10-12.
constexpr int kValueBytes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
constexpr uint32_t kStringType = 8, kArrayType = 9;

// Reads little-endian values off the header, each checked against the end.
class Cursor {
 public:
  Cursor(absl::Span<const uint8_t> bytes, const std::string& source) : bytes_(bytes), source_(source) {}

  uint64_t at() const { return at_; }
  uint64_t left() const { return bytes_.size() - at_; }

  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrFormat("%s: GGUF header at byte %d: %s", source_, at_, what));
  }

  template <typename T>
  absl::StatusOr<T> Get() {
    T value;
    if (left() < sizeof value) return Error(absl::StrFormat("the file ends (%d bytes wanted)", sizeof value));
    std::memcpy(&value, bytes_.data() + at_, sizeof value);  // Little-endian, as the hosts we build for.
    at_ += sizeof value;
    return value;
  }

  absl::StatusOr<std::string> String() {
    ASSIGN_OR_RETURN(const uint64_t size, Get<uint64_t>());
    if (size > left()) return Error(absl::StrFormat("a string of %d bytes runs past the end", size));
    std::string s(reinterpret_cast<const char*>(bytes_.data() + at_), size);
    at_ += size;
    return s;
  }

  absl::StatusOr<nlohmann::json> Value(uint32_t type, int depth) {
    switch (type) {
      case 0: return ToJson<uint8_t>();
      case 1: return ToJson<int8_t>();
      case 2: return ToJson<uint16_t>();
      case 3: return ToJson<int16_t>();
      case 4: return ToJson<uint32_t>();
      case 5: return ToJson<int32_t>();
      case 6: return ToJson<float>();
      case 7: {
        ASSIGN_OR_RETURN(const uint8_t b, Get<uint8_t>());
        return nlohmann::json(b != 0);
      }
      case kStringType: {
        ASSIGN_OR_RETURN(std::string s, String());
        return nlohmann::json(std::move(s));
      }
      case kArrayType: return Array(depth);
      case 10: return ToJson<uint64_t>();
      case 11: return ToJson<int64_t>();
      case 12: return ToJson<double>();
    }
    return Error(absl::StrFormat("unknown value type %d", type));
  }

 private:
  template <typename T>
  absl::StatusOr<nlohmann::json> ToJson() {
    ASSIGN_OR_RETURN(const T value, Get<T>());
    return nlohmann::json(value);
  }

  absl::StatusOr<nlohmann::json> Array(int depth) {
    if (depth >= kMaxGgufArrayDepth) return Error(absl::StrFormat("arrays nested over %d deep", kMaxGgufArrayDepth));
    ASSIGN_OR_RETURN(const uint32_t element, Get<uint32_t>());
    ASSIGN_OR_RETURN(const uint64_t count, Get<uint64_t>());
    // Every element takes a byte at least (a string its 8-byte length):
    // a count the bytes left cannot hold is refused before allocating.
    const uint64_t least = element < std::size(kValueBytes) && kValueBytes[element] > 0 ? kValueBytes[element] : 8;
    if (count > left() / least) return Error(absl::StrFormat("an array of %d elements runs past the end", count));
    nlohmann::json array = nlohmann::json::array();
    for (uint64_t i = 0; i < count; ++i) {
      ASSIGN_OR_RETURN(nlohmann::json value, Value(element, depth + 1));
      array.push_back(std::move(value));
    }
    return array;
  }

  absl::Span<const uint8_t> bytes_;
  const std::string& source_;
  uint64_t at_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> gguf, FromBytes(file->bytes(), path));
  gguf->file_ = std::move(file);
  return gguf;
}

namespace {

absl::Status ReadMetadata(Cursor& cursor, uint64_t count,
                          std::vector<std::pair<std::string, nlohmann::json>>& metadata) {
  std::set<std::string> keys;
  // Each entry takes 12 bytes at least (key length, value type).
  if (count > cursor.left() / 12) return cursor.Error(absl::StrFormat("%d metadata entries cannot fit", count));
  for (uint64_t i = 0; i < count; ++i) {
    ASSIGN_OR_RETURN(std::string key, cursor.String());
    if (!keys.insert(key).second) return cursor.Error(absl::StrFormat("metadata key \"%s\" appears twice", key));
    ASSIGN_OR_RETURN(const uint32_t type, cursor.Get<uint32_t>());
    absl::StatusOr<nlohmann::json> value = cursor.Value(type, 0);
    if (!value.ok()) {
      return absl::InvalidArgumentError(absl::StrFormat("%s (metadata key \"%s\")", value.status().message(), key));
    }
    metadata.emplace_back(std::move(key), *std::move(value));
  }
  return absl::OkStatus();
}

// GGML_MAX_DIMS: ggml's tensors have at most 4 dimensions.
constexpr uint32_t kMaxGgmlDims = 4;

absl::Status ReadTensorInfos(Cursor& cursor, uint64_t count, std::vector<GgufTensorInfo>& tensors) {
  std::set<std::string> names;
  // Each info takes 24 bytes at least (name length, dims, type, offset).
  if (count > cursor.left() / 24) return cursor.Error(absl::StrFormat("%d tensor infos cannot fit", count));
  for (uint64_t i = 0; i < count; ++i) {
    GgufTensorInfo info;
    ASSIGN_OR_RETURN(info.name, cursor.String());
    if (!names.insert(info.name).second) {
      return cursor.Error(absl::StrFormat("tensor \"%s\" appears twice", info.name));
    }
    ASSIGN_OR_RETURN(const uint32_t dims, cursor.Get<uint32_t>());
    if (dims > kMaxGgmlDims) {
      return cursor.Error(absl::StrFormat("tensor \"%s\" has %d dimensions; ggml has at most %d", info.name, dims,
                                          kMaxGgmlDims));
    }
    info.shape.resize(dims);
    for (uint32_t d = 0; d < dims; ++d) {
      ASSIGN_OR_RETURN(const uint64_t extent, cursor.Get<uint64_t>());
      if (extent > (uint64_t{1} << 40)) {
        return cursor.Error(absl::StrFormat("tensor \"%s\": dimension of %d", info.name, extent));
      }
      info.shape[dims - 1 - d] = static_cast<int64_t>(extent);  // The file lists the innermost first.
    }
    ASSIGN_OR_RETURN(info.ggml_type, cursor.Get<uint32_t>());
    ASSIGN_OR_RETURN(info.offset, cursor.Get<uint64_t>());
    tensors.push_back(std::move(info));
  }
  return absl::OkStatus();
}

// Each tensor of a known type lies inside the file.
absl::Status CheckExtents(const std::vector<GgufTensorInfo>& tensors, uint64_t data_offset, uint64_t file_size,
                          const std::string& source) {
  for (const GgufTensorInfo& t : tensors) {
    // Types left out of ggml_blocks.h (the IQ family, ternary) are listed
    // by number; their extent is not checked.
    const GgmlTypeTraits* traits = GgmlTraitsOf(t.ggml_type);
    if (traits == nullptr) continue;
    uint64_t elements = 1;
    for (int64_t extent : t.shape) elements *= static_cast<uint64_t>(extent);  // Each under 2^40, at most 4.
    const uint64_t blocks = (elements + traits->block_elements - 1) / traits->block_elements;
    const uint64_t bytes = blocks * traits->block_bytes;
    if (data_offset > file_size || t.offset > file_size - data_offset || bytes > file_size - data_offset - t.offset) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: tensor \"%s\" (%s, %d bytes at data offset %d) runs past the end of the file (%d bytes)", source,
          t.name, traits->name, bytes, t.offset, file_size));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::FromBytes(absl::Span<const uint8_t> bytes,
                                                              const std::string& source) {
  Cursor cursor(bytes, source);
  ASSIGN_OR_RETURN(const uint32_t magic, cursor.Get<uint32_t>());
  if (magic != 0x46554747) return cursor.Error("expected the magic \"GGUF\"; this is not a GGUF file");
  std::unique_ptr<GgufFile> file(new GgufFile);
  ASSIGN_OR_RETURN(file->version_, cursor.Get<uint32_t>());
  // Version 1 had 32-bit counts and lengths; 2 and 3 (big-endian support) read alike.
  if (file->version_ < 2 || file->version_ > kGgufVersion) {
    return cursor.Error(absl::StrFormat("version %d; expected 2 or 3", file->version_));
  }
  ASSIGN_OR_RETURN(const uint64_t tensor_count, cursor.Get<uint64_t>());
  ASSIGN_OR_RETURN(const uint64_t metadata_count, cursor.Get<uint64_t>());
  RETURN_IF_ERROR(ReadMetadata(cursor, metadata_count, file->metadata_));
  RETURN_IF_ERROR(ReadTensorInfos(cursor, tensor_count, file->tensors_));
  uint64_t alignment = kGgufAlignment;
  for (const auto& [key, value] : file->metadata_) {
    if (key != "general.alignment") continue;
    if (!value.is_number_unsigned() || value.get<uint64_t>() == 0 || value.get<uint64_t>() > (1 << 20)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: general.alignment is %s; expected a count of bytes", source, value.dump()));
    }
    alignment = value.get<uint64_t>();
  }
  file->data_offset_ = (cursor.at() + alignment - 1) / alignment * alignment;
  RETURN_IF_ERROR(CheckExtents(file->tensors_, file->data_offset_, bytes.size(), source));
  file->bytes_ = bytes;
  return file;
}

absl::Span<const uint8_t> GgufFile::TensorData(const GgufTensorInfo& info) const {
  const GgmlTypeTraits* traits = GgmlTraitsOf(info.ggml_type);
  if (traits == nullptr) return {};
  uint64_t elements = 1;
  for (int64_t extent : info.shape) elements *= static_cast<uint64_t>(extent);
  const uint64_t blocks = (elements + traits->block_elements - 1) / traits->block_elements;
  return bytes_.subspan(data_offset_ + info.offset, blocks * traits->block_bytes);  // In the file: CheckExtents.
}

}  // namespace llama
