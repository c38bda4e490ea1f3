#include "checkpoint/safetensors_reader.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

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

// Every error of a file names it.
absl::Status Broken(const std::string& source, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrFormat("%s: %s", source, message));
}

// The JSON header and the data section the offsets are relative to.
struct Layout {
  json header;
  absl::Span<const uint8_t> data;
};

absl::StatusOr<Layout> SplitHeader(absl::Span<const uint8_t> bytes, const std::string& source) {
  if (bytes.size() < 8) {
    return Broken(source, absl::StrFormat(
                              "%d bytes is too short for a safetensors file (8-byte header size first)", bytes.size()));
  }
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = header_size << 8 | bytes[i];
  if (header_size > kMaxSafetensorsHeaderBytes) {
    return Broken(source, absl::StrFormat("header of %d bytes exceeds the %d-byte limit; not a safetensors file?",
                                          header_size, kMaxSafetensorsHeaderBytes));
  }
  if (header_size > bytes.size() - 8) {
    return Broken(source, absl::StrFormat("header of %d bytes runs past the end of the %d-byte file (truncated?)",
                                          header_size, bytes.size()));
  }
  const char* header = reinterpret_cast<const char*>(bytes.data() + 8);
  // No exceptions: a parse failure yields a "discarded" value.
  json root = json::parse(header, header + header_size, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    return Broken(source, "header is not a JSON object");
  }
  return Layout{std::move(root), bytes.subspan(8 + header_size)};
}

absl::Status ReadMetadata(const json& entry, const std::string& source, std::map<std::string, std::string>& metadata) {
  if (!entry.is_object()) return Broken(source, "\"__metadata__\" is not an object of strings");
  for (const auto& [key, value] : entry.items()) {
    if (!value.is_string()) {
      return Broken(source,
                    absl::StrFormat("\"__metadata__\" field \"%s\" is %s; expected a string", key, value.dump()));
    }
    metadata[key] = value.get<std::string>();
  }
  return absl::OkStatus();
}

// A tensor and where its bytes lie in the data section.
struct Placed {
  FileTensor tensor;
  uint64_t begin, end;
};

absl::StatusOr<std::vector<int64_t>> ReadShape(const json& dims, const std::string& what,
                                               const std::string& source) {
  std::vector<int64_t> shape;
  for (const json& dim : dims) {
    absl::StatusOr<uint64_t> extent = Unsigned(dim, absl::StrFormat("%s: a shape dimension", what));
    if (!extent.ok()) return Broken(source, std::string(extent.status().message()));
    if (*extent > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Broken(source, absl::StrFormat("%s: dimension %d is too large", what, *extent));
    }
    shape.push_back(static_cast<int64_t>(*extent));
  }
  return shape;
}

// One tensor's entry, type-checked, its bytes checked against its shape
// and the data section.
absl::StatusOr<Placed> ReadEntry(const std::string& name, const json& entry, absl::Span<const uint8_t> data,
                                 const std::string& source) {
  const std::string what = absl::StrFormat("tensor \"%s\"", name);
  if (!entry.is_object()) return Broken(source, absl::StrFormat("%s: entry is not an object", what));
  const auto dtype_it = entry.find("dtype");
  const auto shape_it = entry.find("shape");
  const auto offsets_it = entry.find("data_offsets");
  if (dtype_it == entry.end() || !dtype_it->is_string()) {
    return Broken(source, absl::StrFormat("%s: \"dtype\" missing or not a string", what));
  }
  if (shape_it == entry.end() || !shape_it->is_array()) {
    return Broken(source, absl::StrFormat("%s: \"shape\" missing or not an array", what));
  }
  if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2) {
    return Broken(source, absl::StrFormat("%s: \"data_offsets\" missing or not [begin, end]", what));
  }
  absl::StatusOr<DType> dtype = SafetensorsDType(dtype_it->get<std::string>());
  if (!dtype.ok()) return Broken(source, absl::StrFormat("%s: %s", what, dtype.status().message()));
  ASSIGN_OR_RETURN(std::vector<int64_t> shape, ReadShape(*shape_it, what, source));
  absl::StatusOr<int64_t> numel = NumElements(shape, what);
  if (!numel.ok()) return Broken(source, std::string(numel.status().message()));
  absl::StatusOr<uint64_t> begin = Unsigned((*offsets_it)[0], absl::StrFormat("%s: data_offsets[0]", what));
  absl::StatusOr<uint64_t> end = Unsigned((*offsets_it)[1], absl::StrFormat("%s: data_offsets[1]", what));
  if (!begin.ok()) return Broken(source, std::string(begin.status().message()));
  if (!end.ok()) return Broken(source, std::string(end.status().message()));
  if (*begin > *end || *end > data.size()) {
    return Broken(source, absl::StrFormat("%s: data_offsets [%d, %d) lie outside the %d-byte data section%s", what,
                                          *begin, *end, data.size(), *end > data.size() ? " (truncated file?)" : ""));
  }
  const uint64_t element = DTypeSize(*dtype);
  if (static_cast<uint64_t>(*numel) > std::numeric_limits<uint64_t>::max() / element ||
      *end - *begin != static_cast<uint64_t>(*numel) * element) {
    return Broken(source, absl::StrFormat("%s: %d bytes at data_offsets [%d, %d), but shape [%s] of %s needs %d",
                                          what, *end - *begin, *begin, *end, absl::StrJoin(shape, ", "),
                                          dtype_it->get<std::string>(), static_cast<uint64_t>(*numel) * element));
  }
  return Placed{FileTensor{name, *dtype, std::move(shape), data.subspan(*begin, *end - *begin)}, *begin, *end};
}

// Sorts the tensors by offset and checks that they tile the data section:
// an overlap means two tensors share bytes, a gap or tail means bytes
// nobody describes.
absl::Status SortAndCheckTiling(std::vector<Placed>& placed, uint64_t data_size, const std::string& source) {
  std::sort(placed.begin(), placed.end(), [](const Placed& a, const Placed& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;
  const std::string* previous = nullptr;
  for (const Placed& p : placed) {
    const std::string& name = p.tensor.name;
    if (p.begin < covered) {
      return Broken(source, absl::StrFormat("tensors \"%s\" and \"%s\" overlap (bytes [%d, %d) of the data section)",
                                            *previous, name, p.begin, covered));
    }
    if (p.begin > covered) {
      return Broken(source, absl::StrFormat("bytes [%d, %d) of the data section belong to no tensor (before \"%s\")",
                                            covered, p.begin, name));
    }
    covered = p.end;
    previous = &name;
  }
  if (covered != data_size) {
    return Broken(source,
                  absl::StrFormat("bytes [%d, %d) of the data section belong to no tensor", covered, data_size));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  return OpenMapped<SafetensorsFile>(path);
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::FromBytes(absl::Span<const uint8_t> bytes,
                                                                            const std::string& source) {
  ASSIGN_OR_RETURN(const Layout layout, SplitHeader(bytes, source));
  auto result = std::unique_ptr<SafetensorsFile>(new SafetensorsFile(source));
  std::vector<Placed> placed;
  for (const auto& [name, entry] : layout.header.items()) {
    if (name == "__metadata__") {
      RETURN_IF_ERROR(ReadMetadata(entry, source, result->metadata_));
      continue;
    }
    ASSIGN_OR_RETURN(Placed tensor, ReadEntry(name, entry, layout.data, source));
    placed.push_back(std::move(tensor));
  }
  RETURN_IF_ERROR(SortAndCheckTiling(placed, layout.data.size(), source));
  std::vector<FileTensor> sorted;
  sorted.reserve(placed.size());
  for (Placed& p : placed) sorted.push_back(std::move(p.tensor));
  result->SetTensors(std::move(sorted));
  return result;
}

}  // namespace llama
