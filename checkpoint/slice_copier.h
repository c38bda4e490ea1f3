// Streams one rank's slice of a tensor, gathered from its source parts
// (conversion_sources.h), into a sink (a shard or a GGUF file), converting
// the element type on the way: f32/f16/bf16 between each other and to
// q8_0, q8_0, q4_k and q6_k blocks as they are, and a GGUF's other ggml block
// types decoded row by row. Memory is a copy buffer of 16 MiB whatever the
// tensor; the sources' pages are dropped from this process once copied.
// Internal to the converter.

#ifndef LLAMA_CHECKPOINT_SLICE_COPIER_H_
#define LLAMA_CHECKPOINT_SLICE_COPIER_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "base/progress.h"
#include "checkpoint/conversion_sources.h"
#include "checkpoint/llama_layout.h"
#include "ops/dtype.h"

namespace llama {

// Where copied bytes go.
using ByteSink = std::function<absl::Status(absl::Span<const uint8_t>)>;

class SliceCopier {
 public:
  SliceCopier(ByteSink sink, ProgressBar* progress) : sink_(std::move(sink)), progress_(progress) {}

  // `range` of the split dimension of `spec` (the whole tensor when it is
  // replicated), from `parts`, as `to`. A non-finite value written is a
  // DataLoss error naming its element (the caller names the tensor).
  absl::Status Copy(const TensorSpec& spec, const std::vector<SourcePart>& parts, DimRange range, DType to);

 private:
  absl::Status CopyStored(const TensorSpec& spec, const std::vector<SourcePart>& parts, DimRange range);
  absl::Status CopyDecoded(const TensorSpec& spec, const SourcePart& part, DimRange range);
  absl::Status Emit(absl::Span<const uint8_t> bytes);
  absl::Status Flush();
  absl::Status Write(absl::Span<const uint8_t> bytes);

  ByteSink sink_;
  ProgressBar* progress_;
  DType from_ = DType::kF32, to_ = DType::kF32;
  int64_t written_elements_ = 0;
  std::vector<uint8_t> buffer_;
};

}  // namespace llama

#endif  // LLAMA_CHECKPOINT_SLICE_COPIER_H_
