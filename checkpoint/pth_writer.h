// Writes PyTorch .pth files that torch.load reads: the zip container
// torch.save produces (stored entries, data 64-byte aligned, zip64 records
// when the file passes 4 GiB) holding a protocol-2 pickle of a state dict
// of contiguous tensors. Used to build checkpoints in Meta's exact layout
// without Python (the launcher's demo job) and to export.
//
// Tensors are written as they are added; the pickle and the central
// directory go at the end. Output goes to "<path>.tmp", renamed by Finish.

#ifndef LLAMA_CHECKPOINT_PTH_WRITER_H_
#define LLAMA_CHECKPOINT_PTH_WRITER_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ops/dtype.h"

namespace llama {

class PthWriter {
 public:
  // `archive_name` is the folder inside the zip (torch.save uses the file's
  // stem, e.g. "consolidated.00").
  static absl::StatusOr<std::unique_ptr<PthWriter>> Create(const std::string& path, const std::string& archive_name);
  ~PthWriter();

  // Appends a tensor (row-major bytes of `shape` in `dtype`).
  absl::Status Add(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                   absl::Span<const uint8_t> bytes);
  // Writes the pickle, version records and the zip directory; renames into place.
  absl::Status Finish();

 private:
  struct Entry {
    std::string name;
    uint64_t offset;  // Of the local header.
    uint64_t size;
    uint32_t crc;
  };
  struct Tensor {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
  };
  PthWriter(std::string path, std::string archive_name, FILE* file)
      : path_(std::move(path)), archive_(std::move(archive_name)), file_(file) {}
  absl::Status WriteEntry(const std::string& name, absl::Span<const uint8_t> data);
  absl::Status Write(const void* data, size_t size);
  // Finish's steps: the data.pkl record, the zip directory (`zip64` set
  // when an entry needs zip64 fields), the end records, flush and rename.
  std::string StateDictPickle() const;
  std::string CentralDirectory(bool& zip64) const;
  std::string EndOfDirectory(uint64_t directory_offset, uint64_t directory_size, bool zip64) const;
  absl::Status Commit();

  std::string path_;
  std::string archive_;
  FILE* file_;
  uint64_t position_ = 0;
  std::vector<Entry> entries_;
  std::vector<Tensor> tensors_;
  bool finished_ = false;
};

}  // namespace llama

#endif  // LLAMA_CHECKPOINT_PTH_WRITER_H_
