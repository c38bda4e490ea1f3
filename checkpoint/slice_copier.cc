#include "checkpoint/slice_copier.h"

#include <sys/mman.h>

#include <algorithm>
#include <optional>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "ops/cast.h"
#include "ops/ggml_blocks.h"

namespace llama {
namespace {

// Copy granularity: bounds the converter's own memory whatever the model.
constexpr size_t kChunkBytes = 16 << 20;

// Drops pages of `bytes` (a read-only file mapping) from this process, so
// resident memory does not grow with the checkpoint; the page cache keeps them.
void ReleasePages(absl::Span<const uint8_t> bytes) {
  const uintptr_t page = 4096;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(bytes.data()) + page - 1) & ~(page - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(bytes.data() + bytes.size()) & ~(page - 1);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

// The part holding index `at` of the split dimension.
const SourcePart* PartAt(const std::vector<SourcePart>& parts, int64_t at) {
  for (const SourcePart& part : parts) {
    if (part.begin <= at && at < part.end) return &part;
  }
  return nullptr;
}

// ggml's `type` is byte for byte our block dtype `dtype`.
bool IsOurBlocks(uint32_t type, DType dtype) {
  return (dtype == DType::kQ8_0 && type == static_cast<uint32_t>(GgmlType::kQ8_0)) ||
         (dtype == DType::kQ4_K && type == static_cast<uint32_t>(GgmlType::kQ4_K)) ||
         (dtype == DType::kQ6_K && type == static_cast<uint32_t>(GgmlType::kQ6_K));
}

}  // namespace

absl::Status SliceCopier::Copy(const TensorSpec& spec, const std::vector<SourcePart>& parts, DimRange range, DType to) {
  from_ = parts[0].dtype;
  to_ = to;
  written_elements_ = 0;
  const std::optional<uint32_t> block_type = parts[0].ggml_block_type;
  // A GGUF Q8_0, Q4_K or Q6_K tensor is our q8_0, q4_k or q6_k already;
  // the other block types, and those three to another type, decode.
  if (block_type.has_value() && !IsOurBlocks(*block_type, to_)) {
    RETURN_IF_ERROR(CopyDecoded(spec, parts[0], range));
  } else {
    if (block_type.has_value()) from_ = to_;  // The blocks as they are.
    RETURN_IF_ERROR(CopyStored(spec, parts, range));
  }
  RETURN_IF_ERROR(Flush());
  for (const SourcePart& part : parts) ReleasePages(part.bytes);
  return absl::OkStatus();
}

// Parts whose bytes are elements of their dtype (or whole blocks of a block type).
absl::Status SliceCopier::CopyStored(const TensorSpec& spec, const std::vector<SourcePart>& parts, DimRange range) {
  const int dim = spec.split_dim();
  const auto bytes_of = [this](int64_t elements) { return TensorBytes(from_, elements); };
  if (dim < 0) return Emit(parts[0].bytes);
  // Rows (dim 0) come in contiguous runs per part; columns (dim 1) in a
  // run per part for every row.
  const int64_t rows = dim == 1 ? spec.shape[0] : 1;
  for (int64_t row = 0; row < rows; ++row) {
    for (int64_t at = range.begin; at < range.end;) {
      const SourcePart* part = PartAt(parts, at);
      if (part == nullptr) {
        return absl::InternalError(absl::StrFormat("no source holds index %d of dim %d", at, dim));
      }
      const int64_t stop = std::min(range.end, part->end);
      const size_t unit = dim == 0 ? bytes_of(spec.shape[1]) : bytes_of(1);  // Bytes per index (rows only, blocks).
      const size_t row_offset = dim == 0 ? 0 : row * bytes_of(part->end - part->begin);
      if (!part->row_order.empty()) {  // Rows stored out of order: one at a time.
        for (; at < stop; ++at) {
          RETURN_IF_ERROR(Emit(part->bytes.subspan(part->row_order[at - part->begin] * unit, unit)));
        }
        continue;
      }
      const size_t offset = dim == 0 ? (at - part->begin) * unit : bytes_of(at - part->begin);
      const size_t length = dim == 0 ? (stop - at) * unit : bytes_of(stop - at);
      RETURN_IF_ERROR(Emit(part->bytes.subspan(row_offset + offset, length)));
      at = stop;
    }
  }
  return absl::OkStatus();
}

// A GGUF part of ggml blocks (one part, the whole 2-D tensor): each row
// needed is decoded whole and its slice queued as f32.
absl::Status SliceCopier::CopyDecoded(const TensorSpec& spec, const SourcePart& part, DimRange range) {
  from_ = DType::kF32;
  const uint32_t type = *part.ggml_block_type;
  const int64_t rows = spec.shape[0], cols = spec.shape[1];
  const int64_t row_bytes = GgmlRowBytes(*GgmlTraitsOf(type), cols);
  const int dim = spec.split_dim();
  const DimRange row_range = dim == 0 ? range : DimRange{0, rows};
  const DimRange col_range = dim == 1 ? range : DimRange{0, cols};
  std::vector<float> row(cols);
  for (int64_t r = row_range.begin; r < row_range.end; ++r) {
    RETURN_IF_ERROR(DecodeGgmlRow(type, part.bytes.data() + r * row_bytes, cols, row.data()));
    RETURN_IF_ERROR(Emit(absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(row.data() + col_range.begin),
                                             (col_range.end - col_range.begin) * sizeof(float))));
  }
  return absl::OkStatus();
}

// Queues source bytes for output (converted to the output dtype), in
// units of one element, or of one block for a block type (every run of a
// row is whole blocks: ConvertCheckpoint checks the row lengths).
absl::Status SliceCopier::Emit(absl::Span<const uint8_t> bytes) {
  const size_t unit = BlockElements(to_);
  const size_t in_size = TensorBytes(from_, unit), out_size = TensorBytes(to_, unit);
  while (!bytes.empty()) {
    if (from_ == to_ && buffer_.empty() && bytes.size() >= kChunkBytes) {
      // Large same-type runs go straight from the mapping to the file, in
      // whole units (16 MiB is not a multiple of q8_0's 34 bytes, q4_k's 144
      // or q6_k's 210).
      const size_t n = bytes.size() / kChunkBytes * kChunkBytes / in_size * in_size;
      RETURN_IF_ERROR(Write(bytes.subspan(0, n)));
      bytes.remove_prefix(n);
      continue;
    }
    const size_t room = (kChunkBytes - buffer_.size()) / out_size;
    const size_t count = std::min(room, bytes.size() / in_size);  // Units.
    if (count == 0 && bytes.size() < in_size) {
      return absl::InternalError(absl::StrFormat("%d bytes left over: not a whole %s unit", bytes.size(), DTypeName(to_)));
    }
    const size_t old = buffer_.size();
    buffer_.resize(old + count * out_size);
    RETURN_IF_ERROR(CastElements(bytes.data(), from_, buffer_.data() + old, to_, count * unit));
    bytes.remove_prefix(count * in_size);
    if (buffer_.size() + out_size > kChunkBytes) {
      RETURN_IF_ERROR(Flush());
    }
  }
  return absl::OkStatus();
}

absl::Status SliceCopier::Flush() {
  absl::Status status = Write(buffer_);
  buffer_.clear();
  return status;
}

// Checks what is written: a NaN or infinity in the source (a damaged
// download that still converts) or made by narrowing (an f32 value beyond
// f16's range) would otherwise surface only as a non-finite activation at
// generation time. The converter reads every byte anyway; the check costs
// a pass over data already in cache.
absl::Status SliceCopier::Write(absl::Span<const uint8_t> bytes) {
  if (bytes.empty()) return absl::OkStatus();
  // Block output was checked while quantizing (CastElements refuses
  // non-finite values) or is llama-quantize's, copied.
  const int64_t unit = BlockElements(to_);
  const size_t count = bytes.size() / TensorBytes(to_, unit) * unit;
  if (const int64_t bad = IsBlockDType(to_) ? -1 : FindNonFinite(bytes.data(), to_, count); bad >= 0) {
    // The caller names the tensor and the shard.
    return absl::DataLossError(absl::StrFormat(
        "element %d of the shard's part is NaN or infinite as %s%s; the checkpoint is damaged "
        "(download it again; the checklist shows which file)",
        written_elements_ + bad, DTypeName(to_),
        from_ != to_ ? absl::StrFormat(" (converted from %s: a value may overflow it)", DTypeName(from_)) : ""));
  }
  written_elements_ += count;
  progress_->Add(bytes.size());
  return sink_(bytes);
}

}  // namespace llama
