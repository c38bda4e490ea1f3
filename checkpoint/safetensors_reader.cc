#include "checkpoint/safetensors_reader.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "checkpoint/pth_reader.h"
#include "ops/status_macros.h"

namespace llama {
namespace {

using json = nlohmann::json;

// The format's dtype names; the float8 and unsigned wide types have no
// DType and are refused by name.
absl::StatusOr<DType> SafetensorsDType(const std::string& name) {
  static const std::pair<const char*, DType> kNames[] = {
      {"F64", DType::kF64}, {"F32", DType::kF32}, {"F16", DType::kF16}, {"BF16", DType::kBF16},
      {"I64", DType::kI64}, {"I32", DType::kI32}, {"I16", DType::kI16}, {"I8", DType::kI8},
      {"U8", DType::kU8},   {"BOOL", DType::kBool},
  };
  for (const auto& [text, dtype] : kNames) {
    if (name == text) return dtype;
  }
  return absl::UnimplementedError(
      absl::StrFormat("dtype \"%s\" is not supported (expected F32, F16, BF16, F64, I64, I32, I16, I8, U8 or BOOL)",
                      name));
}

// A JSON value that must be an unsigned integer (the format writes no
// floats for sizes; 1e3 or -1 is a broken file).
absl::StatusOr<uint64_t> Unsigned(const json& value, absl::string_view what) {
  if (!value.is_number_unsigned()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s is %s; expected a non-negative integer", what, value.dump()));
  }
  return value.get<uint64_t>();
}

}  // namespace

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> result, FromBytes(file->bytes(), path));
  result->file_ = std::move(file);
  return result;
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::FromBytes(absl::Span<const uint8_t> bytes,
                                                                            const std::string& source) {
  const auto error = [&](const std::string& message) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: %s", source, message));
  };
  if (bytes.size() < 8) {
    return error(absl::StrFormat("%d bytes is too short for a safetensors file (8-byte header size first)",
                                 bytes.size()));
  }
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = header_size << 8 | bytes[i];
  if (header_size > kMaxSafetensorsHeaderBytes) {
    return error(absl::StrFormat("header of %d bytes exceeds the %d-byte limit; not a safetensors file?",
                                 header_size, kMaxSafetensorsHeaderBytes));
  }
  if (header_size > bytes.size() - 8) {
    return error(absl::StrFormat("header of %d bytes runs past the end of the %d-byte file (truncated?)",
                                 header_size, bytes.size()));
  }
  const char* header = reinterpret_cast<const char*>(bytes.data() + 8);
  // No exceptions: a parse failure yields a "discarded" value.
  const json root = json::parse(header, header + header_size, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    return error("header is not a JSON object");
  }
  const absl::Span<const uint8_t> data = bytes.subspan(8 + header_size);

  auto result = std::unique_ptr<SafetensorsFile>(new SafetensorsFile());
  result->path_ = source;
  struct Placed {
    uint64_t begin, end;
    size_t index;
  };
  std::vector<Placed> placed;
  for (const auto& [name, entry] : root.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) return error("\"__metadata__\" is not an object of strings");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) {
          return error(absl::StrFormat("\"__metadata__\" field \"%s\" is %s; expected a string", key, value.dump()));
        }
        result->metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    const std::string what = absl::StrFormat("tensor \"%s\"", name);
    if (!entry.is_object()) return error(absl::StrFormat("%s: entry is not an object", what));
    const auto dtype_it = entry.find("dtype");
    const auto shape_it = entry.find("shape");
    const auto offsets_it = entry.find("data_offsets");
    if (dtype_it == entry.end() || !dtype_it->is_string()) {
      return error(absl::StrFormat("%s: \"dtype\" missing or not a string", what));
    }
    if (shape_it == entry.end() || !shape_it->is_array()) {
      return error(absl::StrFormat("%s: \"shape\" missing or not an array", what));
    }
    if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2) {
      return error(absl::StrFormat("%s: \"data_offsets\" missing or not [begin, end]", what));
    }
    SafetensorsTensor tensor;
    tensor.name = name;
    absl::StatusOr<DType> dtype = SafetensorsDType(dtype_it->get<std::string>());
    if (!dtype.ok()) return error(absl::StrFormat("%s: %s", what, dtype.status().message()));
    tensor.dtype = *dtype;
    for (const json& dim : *shape_it) {
      absl::StatusOr<uint64_t> extent = Unsigned(dim, absl::StrFormat("%s: a shape dimension", what));
      if (!extent.ok()) return error(std::string(extent.status().message()));
      if (*extent > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return error(absl::StrFormat("%s: dimension %d is too large", what, *extent));
      }
      tensor.shape.push_back(static_cast<int64_t>(*extent));
    }
    absl::StatusOr<int64_t> numel = NumElements(tensor.shape, what);
    if (!numel.ok()) return error(std::string(numel.status().message()));
    absl::StatusOr<uint64_t> begin = Unsigned((*offsets_it)[0], absl::StrFormat("%s: data_offsets[0]", what));
    absl::StatusOr<uint64_t> end = Unsigned((*offsets_it)[1], absl::StrFormat("%s: data_offsets[1]", what));
    if (!begin.ok()) return error(std::string(begin.status().message()));
    if (!end.ok()) return error(std::string(end.status().message()));
    if (*begin > *end || *end > data.size()) {
      return error(absl::StrFormat("%s: data_offsets [%d, %d) lie outside the %d-byte data section%s", what, *begin,
                                   *end, data.size(), *end > data.size() ? " (truncated file?)" : ""));
    }
    const uint64_t element = DTypeSize(tensor.dtype);
    if (static_cast<uint64_t>(*numel) > std::numeric_limits<uint64_t>::max() / element ||
        *end - *begin != static_cast<uint64_t>(*numel) * element) {
      return error(absl::StrFormat("%s: %d bytes at data_offsets [%d, %d), but shape [%s] of %s needs %d", what,
                                   *end - *begin, *begin, *end, absl::StrJoin(tensor.shape, ", "),
                                   dtype_it->get<std::string>(), static_cast<uint64_t>(*numel) * element));
    }
    tensor.bytes = data.subspan(*begin, *end - *begin);
    placed.push_back({*begin, *end, result->tensors_.size()});
    result->tensors_.push_back(std::move(tensor));
  }
  // The tensors must tile the data section: an overlap means two tensors
  // share bytes, a gap or tail means bytes nobody describes.
  std::sort(placed.begin(), placed.end(), [](const Placed& a, const Placed& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;
  const std::string* previous = nullptr;
  for (const Placed& p : placed) {
    const std::string& name = result->tensors_[p.index].name;
    if (p.begin < covered) {
      return error(absl::StrFormat("tensors \"%s\" and \"%s\" overlap (bytes [%d, %d) of the data section)",
                                   *previous, name, p.begin, covered));
    }
    if (p.begin > covered) {
      return error(absl::StrFormat("bytes [%d, %d) of the data section belong to no tensor (before \"%s\")", covered,
                                   p.begin, name));
    }
    covered = p.end;
    previous = &name;
  }
  if (covered != data.size()) {
    return error(absl::StrFormat("bytes [%d, %d) of the data section belong to no tensor", covered, data.size()));
  }
  std::vector<SafetensorsTensor> sorted;
  sorted.reserve(placed.size());
  for (const Placed& p : placed) sorted.push_back(std::move(result->tensors_[p.index]));
  result->tensors_ = std::move(sorted);
  return result;
}

const SafetensorsTensor* SafetensorsFile::Find(absl::string_view name) const {
  for (const SafetensorsTensor& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

}  // namespace llama
