#include "checkpoint/zip_reader.h"

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace llama {
namespace {

constexpr uint32_t kLocalHeaderSignature = 0x04034B50;
constexpr uint32_t kCentralHeaderSignature = 0x02014B50;
constexpr uint32_t kEndOfCentralDirSignature = 0x06054B50;
constexpr uint32_t kZip64EndOfCentralDirSignature = 0x06064B50;
constexpr uint32_t kZip64LocatorSignature = 0x07064B50;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr size_t kEndOfCentralDirSize = 22;
constexpr size_t kZip64LocatorSize = 20;
constexpr size_t kZip64EndOfCentralDirSize = 56;
constexpr size_t kCentralHeaderSize = 46;
constexpr size_t kLocalHeaderSize = 30;
// A state dict of a 70B shard has ~1k tensors; this bounds hostile input.
constexpr uint64_t kMaxEntries = 1 << 20;

// Little-endian reads from a span whose bounds the caller has checked.
uint16_t U16(absl::Span<const uint8_t> b, size_t at) { return b[at] | (b[at + 1] << 8); }
uint32_t U32(absl::Span<const uint8_t> b, size_t at) {
  return static_cast<uint32_t>(U16(b, at)) | (static_cast<uint32_t>(U16(b, at + 2)) << 16);
}
uint64_t U64(absl::Span<const uint8_t> b, size_t at) {
  return static_cast<uint64_t>(U32(b, at)) | (static_cast<uint64_t>(U32(b, at + 4)) << 32);
}

class Parser {
 public:
  Parser(absl::Span<const uint8_t> bytes, const std::string& source)
      : bytes_(bytes), source_(source) {}

  absl::Status Error(absl::string_view what) const {
    return absl::DataLossError(absl::StrFormat("%s: not a valid zip archive: %s", source_, what));
  }

  // Fills directory offset/size/count from the (zip64) end records.
  absl::Status ReadEndRecords(uint64_t* cd_offset, uint64_t* cd_size, uint64_t* count) {
    if (bytes_.size() < kEndOfCentralDirSize) return Error("file too short (truncated?)");
    // The end record sits in the last 22 + up to 65535 (comment) bytes.
    const size_t lowest = bytes_.size() > kEndOfCentralDirSize + 0xFFFF
                              ? bytes_.size() - kEndOfCentralDirSize - 0xFFFF
                              : 0;
    size_t eocd = bytes_.size() - kEndOfCentralDirSize;
    while (U32(bytes_, eocd) != kEndOfCentralDirSignature) {
      if (eocd == lowest) return Error("no end-of-central-directory record (truncated file?)");
      --eocd;
    }
    uint32_t disk = U16(bytes_, eocd + 4), cd_disk = U16(bytes_, eocd + 6);
    *count = U16(bytes_, eocd + 10);
    *cd_size = U32(bytes_, eocd + 12);
    *cd_offset = U32(bytes_, eocd + 16);
    const bool needs_zip64 = *count == 0xFFFF || *cd_size == 0xFFFFFFFF || *cd_offset == 0xFFFFFFFF;
    if (eocd >= kZip64LocatorSize && U32(bytes_, eocd - kZip64LocatorSize) == kZip64LocatorSignature) {
      const uint64_t record = U64(bytes_, eocd - kZip64LocatorSize + 8);
      if (record > bytes_.size() || bytes_.size() - record < kZip64EndOfCentralDirSize ||
          U32(bytes_, record) != kZip64EndOfCentralDirSignature) {
        return Error("zip64 end-of-central-directory record is missing or out of bounds");
      }
      disk = U32(bytes_, record + 16);
      cd_disk = U32(bytes_, record + 20);
      *count = U64(bytes_, record + 32);
      *cd_size = U64(bytes_, record + 40);
      *cd_offset = U64(bytes_, record + 48);
    } else if (needs_zip64) {
      return Error("end record needs zip64 but there is no zip64 locator");
    }
    if (disk != 0 || cd_disk != 0) return Error("multi-disk archives are not supported");
    if (*count > kMaxEntries) return Error(absl::StrFormat("%d entries (limit %d)", *count, kMaxEntries));
    if (*cd_offset > bytes_.size() || *cd_size > bytes_.size() - *cd_offset) {
      return Error(absl::StrFormat("central directory [%d, +%d) runs past the end of the file (%d bytes)",
                                   *cd_offset, *cd_size, bytes_.size()));
    }
    return absl::OkStatus();
  }

  // Reads the central entry at `*at`, advancing it.
  absl::StatusOr<ZipEntry> ReadCentralEntry(uint64_t* at, uint64_t cd_end) {
    if (cd_end - *at < kCentralHeaderSize || U32(bytes_, *at) != kCentralHeaderSignature) {
      return Error(absl::StrFormat("corrupt central directory entry at offset %d", *at));
    }
    const size_t h = *at;
    const uint16_t flags = U16(bytes_, h + 8);
    const uint16_t method = U16(bytes_, h + 10);
    uint64_t compressed = U32(bytes_, h + 20);
    uint64_t size = U32(bytes_, h + 24);
    const size_t name_length = U16(bytes_, h + 28);
    const size_t extra_length = U16(bytes_, h + 30);
    const size_t comment_length = U16(bytes_, h + 32);
    uint64_t local_offset = U32(bytes_, h + 42);
    const uint64_t record_size = kCentralHeaderSize + name_length + extra_length + comment_length;
    if (cd_end - h < record_size) {
      return Error(absl::StrFormat("central directory entry at offset %d runs past the directory", h));
    }
    ZipEntry entry;
    entry.name.assign(reinterpret_cast<const char*>(bytes_.data() + h + kCentralHeaderSize), name_length);

    // Zip64 extra field: 64-bit values for exactly the 32-bit fields that are 0xFFFFFFFF, in order.
    size_t extra = h + kCentralHeaderSize + name_length;
    const size_t extra_end = extra + extra_length;
    while (extra_end - extra >= 4) {
      const uint16_t id = U16(bytes_, extra);
      const size_t length = U16(bytes_, extra + 2);
      if (extra_end - extra - 4 < length) return Error(absl::StrFormat("entry \"%s\": bad extra field", entry.name));
      if (id == kZip64ExtraId) {
        size_t field = extra + 4;
        const size_t field_end = field + length;
        for (uint64_t* value : {&size, &compressed, &local_offset}) {
          if (*value != 0xFFFFFFFF) continue;
          if (field_end - field < 8) return Error(absl::StrFormat("entry \"%s\": short zip64 field", entry.name));
          *value = U64(bytes_, field);
          field += 8;
        }
      }
      extra += 4 + length;
    }
    if (flags & 0x1) return Error(absl::StrFormat("entry \"%s\" is encrypted", entry.name));
    if (method != 0) {
      return absl::UnimplementedError(absl::StrFormat(
          "%s: entry \"%s\" is compressed (method %d); torch.save writes stored entries only — "
          "was the file re-zipped?",
          source_, entry.name, method));
    }
    if (compressed != size) {
      return Error(absl::StrFormat("stored entry \"%s\" has compressed size %d != size %d", entry.name,
                                   compressed, size));
    }
    // The local header's own name/extra lengths give where the data starts.
    if (local_offset > bytes_.size() || bytes_.size() - local_offset < kLocalHeaderSize ||
        U32(bytes_, local_offset) != kLocalHeaderSignature) {
      return Error(absl::StrFormat("entry \"%s\": local header at offset %d is missing or out of bounds",
                                   entry.name, local_offset));
    }
    const uint64_t data = local_offset + kLocalHeaderSize + U16(bytes_, local_offset + 26) +
                          U16(bytes_, local_offset + 28);
    if (data > bytes_.size() || size > bytes_.size() - data) {
      return Error(absl::StrFormat("entry \"%s\": data [%d, +%d) runs past the end of the file (%d bytes); "
                                   "the file is truncated",
                                   entry.name, data, size, bytes_.size()));
    }
    entry.data_offset = data;
    entry.size = size;
    *at += record_size;
    return entry;
  }

 private:
  absl::Span<const uint8_t> bytes_;
  const std::string& source_;
};

}  // namespace

absl::StatusOr<ZipArchive> ZipArchive::Parse(absl::Span<const uint8_t> bytes, std::string source) {
  Parser parser(bytes, source);
  uint64_t cd_offset = 0, cd_size = 0, count = 0;
  RETURN_IF_ERROR(parser.ReadEndRecords(&cd_offset, &cd_size, &count));
  ZipArchive archive;
  archive.bytes_ = bytes;
  archive.entries_.reserve(count);
  uint64_t at = cd_offset;
  for (uint64_t i = 0; i < count; ++i) {
    ASSIGN_OR_RETURN(ZipEntry entry, parser.ReadCentralEntry(&at, cd_offset + cd_size));
    if (!archive.by_name_.emplace(entry.name, archive.entries_.size()).second) {
      return parser.Error(absl::StrFormat("entry \"%s\" appears twice", entry.name));
    }
    archive.entries_.push_back(std::move(entry));
  }
  return archive;
}

const ZipEntry* ZipArchive::Find(absl::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &entries_[it->second];
}

}  // namespace llama
