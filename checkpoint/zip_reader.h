// The zip container of PyTorch's .pth files (torch.save since 1.6).
//
// Only what torch.save writes is accepted: stored (uncompressed),
// unencrypted entries in a single-disk archive, with zip64 records when the
// file or an entry passes 4 GiB. The central directory is the source of
// truth for sizes (torch.save sets the data-descriptor flag and leaves sizes
// in local headers at zero); local headers give the data offset, since their
// extra field pads data to 64-byte alignment. Every offset and size is
// checked against the file before use.

#ifndef LLAMA_CHECKPOINT_ZIP_READER_H_
#define LLAMA_CHECKPOINT_ZIP_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace llama {

struct ZipEntry {
  std::string name;
  uint64_t data_offset = 0;  // From the start of the archive.
  uint64_t size = 0;
};

// A parsed archive over bytes it does not own (typically a MappedFile).
class ZipArchive {
 public:
  // Parses the central directory of `bytes`; `source` (a path) prefixes
  // every error message.
  static absl::StatusOr<ZipArchive> Parse(absl::Span<const uint8_t> bytes, std::string source);

  const std::vector<ZipEntry>& entries() const { return entries_; }

  // The entry called `name`, or null.
  const ZipEntry* Find(absl::string_view name) const;

  // The entry's bytes (inside the span given to Parse).
  absl::Span<const uint8_t> Data(const ZipEntry& entry) const {
    return bytes_.subspan(entry.data_offset, entry.size);
  }

 private:
  absl::Span<const uint8_t> bytes_;
  std::vector<ZipEntry> entries_;
  absl::flat_hash_map<std::string, size_t> by_name_;
};

}  // namespace llama

#endif  // LLAMA_CHECKPOINT_ZIP_READER_H_
