#include "checkpoint/pth_reader.h"

#include <cstring>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "checkpoint/torch_unpickler.h"
#include "checkpoint/zip_reader.h"

namespace llama {
namespace {

// What torch.save wrote before the zip format: pickle protocol 2 followed by
// LONG1 of torch's magic number 0x1950a86a20f9469cfc6c.
constexpr uint8_t kLegacyMagic[] = {0x80, 0x02, 0x8A, 0x0A, 0x6C, 0xFC, 0x9C, 0x46, 0xF9, 0x20};

bool IsContiguous(absl::Span<const int64_t> shape, absl::Span<const int64_t> strides) {
  int64_t expected = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1 && strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

}  // namespace

absl::StatusOr<int64_t> NumElements(absl::Span<const int64_t> shape, absl::string_view what) {
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: negative dimension in shape [%s]", what, absl::StrJoin(shape, ", ")));
    }
    if (dim != 0 && count > INT64_MAX / dim) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: shape [%s] overflows int64", what, absl::StrJoin(shape, ", ")));
    }
    count *= dim;
  }
  return count;
}

absl::StatusOr<std::unique_ptr<PthFile>> PthFile::Open(const std::string& path) {
  absl::StatusOr<std::unique_ptr<MappedFile>> file = MappedFile::Open(path);
  if (!file.ok()) return file.status();
  absl::StatusOr<std::unique_ptr<PthFile>> pth = FromBytes((*file)->bytes(), path);
  if (!pth.ok()) return pth.status();
  (*pth)->file_ = *std::move(file);
  return pth;
}

absl::StatusOr<std::unique_ptr<PthFile>> PthFile::FromBytes(absl::Span<const uint8_t> bytes,
                                                            const std::string& source) {
  if (bytes.size() >= sizeof(kLegacyMagic) &&
      std::memcmp(bytes.data(), kLegacyMagic, sizeof(kLegacyMagic)) == 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s is in PyTorch's legacy (pre-1.6, non-zip) format, which cannot be read without "
        "executing it. Re-save it with a recent PyTorch: torch.save(torch.load(path), path)",
        source));
  }
  absl::StatusOr<ZipArchive> archive = ZipArchive::Parse(bytes, source);
  if (!archive.ok()) return archive.status();

  // Every record sits under one top-level folder, named after the file.
  std::string prefix;
  for (const ZipEntry& entry : archive->entries()) {
    if (absl::EndsWith(entry.name, "/data.pkl") &&
        entry.name.find('/') == entry.name.size() - sizeof("/data.pkl") + 1) {
      if (!prefix.empty()) {
        return absl::InvalidArgumentError(absl::StrFormat("%s: more than one data.pkl record", source));
      }
      prefix = entry.name.substr(0, entry.name.size() - sizeof("data.pkl") + 1);
    }
  }
  if (prefix.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: zip archive has no <name>/data.pkl record; not a torch.save checkpoint", source));
  }
  if (const ZipEntry* byteorder = archive->Find(prefix + "byteorder"); byteorder != nullptr) {
    absl::Span<const uint8_t> order = archive->Data(*byteorder);
    if (std::string(order.begin(), order.end()) != "little") {
      return absl::UnimplementedError(absl::StrFormat(
          "%s: tensors are stored %s-endian; only little-endian checkpoints are supported", source,
          std::string(order.begin(), order.end())));
    }
  }

  absl::StatusOr<std::vector<PickledTensor>> pickled =
      UnpickleStateDict(archive->Data(*archive->Find(prefix + "data.pkl")), source);
  if (!pickled.ok()) return pickled.status();

  auto pth = std::unique_ptr<PthFile>(new PthFile());
  pth->path_ = source;
  absl::flat_hash_set<std::string> names;
  for (PickledTensor& t : *pickled) {
    const std::string what = absl::StrFormat("%s: tensor \"%s\"", source, t.name);
    if (!names.insert(t.name).second) {
      return absl::InvalidArgumentError(absl::StrFormat("%s appears twice in the state dict", what));
    }
    const ZipEntry* storage = archive->Find(prefix + "data/" + t.storage_key);
    if (storage == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: its storage record data/%s is missing", what, t.storage_key));
    }
    const size_t element = DTypeSize(t.dtype);
    if (t.storage_numel < 0 || static_cast<uint64_t>(t.storage_numel) > storage->size / element) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: storage data/%s claims %d elements of %s but the record holds %d bytes", what,
          t.storage_key, t.storage_numel, DTypeName(t.dtype), storage->size));
    }
    absl::StatusOr<int64_t> numel = NumElements(t.shape, what);
    if (!numel.ok()) return numel.status();
    if (!IsContiguous(t.shape, t.strides)) {
      return absl::UnimplementedError(absl::StrFormat(
          "%s is not contiguous (shape [%s], strides [%s]); re-save it with "
          "tensor.contiguous()",
          what, absl::StrJoin(t.shape, ", "), absl::StrJoin(t.strides, ", ")));
    }
    if (t.storage_offset < 0 || t.storage_offset > t.storage_numel ||
        *numel > t.storage_numel - t.storage_offset) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: elements [%d, +%d) run past its storage of %d elements", what, t.storage_offset,
          *numel, t.storage_numel));
    }
    PthTensor tensor;
    tensor.name = t.name;
    tensor.dtype = t.dtype;
    tensor.shape = std::move(t.shape);
    tensor.bytes = archive->Data(*storage).subspan(t.storage_offset * element, *numel * element);
    pth->tensors_.push_back(std::move(tensor));
  }
  return pth;
}

const PthTensor* PthFile::Find(absl::string_view name) const {
  for (const PthTensor& tensor : tensors_) {
    if (tensor.name == name) return &tensor;
  }
  return nullptr;
}

}  // namespace llama
