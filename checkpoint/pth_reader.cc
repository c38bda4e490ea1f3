#include "checkpoint/pth_reader.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
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

absl::Status RefuseLegacyFormat(absl::Span<const uint8_t> bytes, const std::string& source) {
  if (bytes.size() >= sizeof(kLegacyMagic) &&
      std::memcmp(bytes.data(), kLegacyMagic, sizeof(kLegacyMagic)) == 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s is in PyTorch's legacy (pre-1.6, non-zip) format, which cannot be read without "
        "executing it. Re-save it with a recent PyTorch: torch.save(torch.load(path), path)",
        source));
  }
  return absl::OkStatus();
}

// The top-level folder every record sits under, named after the file
// ("consolidated.00/"): the one that holds data.pkl.
absl::StatusOr<std::string> RecordPrefix(const ZipArchive& archive, const std::string& source) {
  std::string prefix;
  for (const ZipEntry& entry : archive.entries()) {
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
  return prefix;
}

absl::Status RefuseBigEndian(const ZipArchive& archive, const std::string& prefix, const std::string& source) {
  if (const ZipEntry* byteorder = archive.Find(prefix + "byteorder"); byteorder != nullptr) {
    absl::Span<const uint8_t> order = archive.Data(*byteorder);
    if (std::string(order.begin(), order.end()) != "little") {
      return absl::UnimplementedError(absl::StrFormat(
          "%s: tensors are stored %s-endian; only little-endian checkpoints are supported", source,
          std::string(order.begin(), order.end())));
    }
  }
  return absl::OkStatus();
}

// The bytes of pickled tensor `t`, checked to lie inside its storage
// record; `what` names it in errors.
absl::StatusOr<FileTensor> ViewTensor(const ZipArchive& archive, const std::string& prefix, PickledTensor& t,
                                      const std::string& what) {
  const ZipEntry* storage = archive.Find(prefix + "data/" + t.storage_key);
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
  ASSIGN_OR_RETURN(const int64_t numel, NumElements(t.shape, what));
  if (!IsContiguous(t.shape, t.strides)) {
    return absl::UnimplementedError(absl::StrFormat(
        "%s is not contiguous (shape [%s], strides [%s]); re-save it with "
        "tensor.contiguous()",
        what, absl::StrJoin(t.shape, ", "), absl::StrJoin(t.strides, ", ")));
  }
  if (t.storage_offset < 0 || t.storage_offset > t.storage_numel ||
      numel > t.storage_numel - t.storage_offset) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: elements [%d, +%d) run past its storage of %d elements", what, t.storage_offset,
        numel, t.storage_numel));
  }
  return FileTensor{t.name, t.dtype, std::move(t.shape),
                    archive.Data(*storage).subspan(t.storage_offset * element, numel * element)};
}

}  // namespace

absl::StatusOr<std::unique_ptr<PthFile>> PthFile::Open(const std::string& path) {
  return OpenMapped<PthFile>(path);
}

absl::StatusOr<std::unique_ptr<PthFile>> PthFile::FromBytes(absl::Span<const uint8_t> bytes,
                                                            const std::string& source) {
  RETURN_IF_ERROR(RefuseLegacyFormat(bytes, source));
  ASSIGN_OR_RETURN(const ZipArchive archive, ZipArchive::Parse(bytes, source));
  ASSIGN_OR_RETURN(const std::string prefix, RecordPrefix(archive, source));
  RETURN_IF_ERROR(RefuseBigEndian(archive, prefix, source));
  ASSIGN_OR_RETURN(std::vector<PickledTensor> pickled,
                   UnpickleStateDict(archive.Data(*archive.Find(prefix + "data.pkl")), source));

  auto pth = std::unique_ptr<PthFile>(new PthFile(source));
  for (PickledTensor& t : pickled) {
    const std::string what = absl::StrFormat("%s: tensor \"%s\"", source, t.name);
    if (pth->Find(t.name) != nullptr) {
      return absl::InvalidArgumentError(absl::StrFormat("%s appears twice in the state dict", what));
    }
    ASSIGN_OR_RETURN(FileTensor tensor, ViewTensor(archive, prefix, t, what));
    pth->AddTensor(std::move(tensor));
  }
  return pth;
}

}  // namespace llama
