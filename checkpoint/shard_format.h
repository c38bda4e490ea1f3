// Reading and writing shard files (layout: shard.proto).

#ifndef LLAMA_CHECKPOINT_SHARD_FORMAT_H_
#define LLAMA_CHECKPOINT_SHARD_FORMAT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "base/staged_file.h"
#include "checkpoint/model_config.h"
#include "checkpoint/shard.pb.h"
#include "checkpoint/tensor_file.h"
#include "ops/dtype.h"

struct XXH3_state_s;

namespace llama {

inline constexpr char kShardMagic[8] = {'L', 'L', 'A', 'M', 'A', '2', 'S', 'H'};
inline constexpr uint32_t kShardFormatVersion = 1;
inline constexpr size_t kShardHeaderSize = 64;
// Page size: tensors can be mapped, read with O_DIRECT, or pinned for DMA
// one by one; it also exceeds every SIMD and GPU vector alignment. Costs at
// most 4 KiB per tensor (~1 MiB for a 70B rank's ~700 tensors).
inline constexpr uint64_t kShardAlignment = 4096;
// Bounds on what a reader trusts before parsing.
inline constexpr uint64_t kMaxShardIndexBytes = 64 << 20;
inline constexpr int kMaxShardTensors = 1 << 16;

// "rank-<r>-of-<n>.shard", the file name of rank r's shard.
std::string ShardFileName(int rank, int world_size);

shard::ModelConfig ModelConfigToProto(const ModelConfig& config);
ModelConfig ModelConfigFromProto(const shard::ModelConfig& proto);

// A tensor of a mapped shard; `bytes` lives as long as the ShardReader.
struct ShardTensor {
  const shard::TensorEntry* entry;
  DType dtype;
  absl::Span<const uint8_t> bytes;
};

// Tensors in index order (by offset).
class ShardReader : public TensorFile {
 public:
  // Maps `path` and validates header and index (bounds, alignment, order,
  // overlaps, sizes against shapes and dtypes, unique names). Checksums are
  // only checked by VerifyChecksums, which reads every byte.
  static absl::StatusOr<std::unique_ptr<ShardReader>> Open(const std::string& path);
  // The same over bytes in memory (fuzzing); `bytes` must outlive the result.
  static absl::StatusOr<std::unique_ptr<ShardReader>> FromBytes(absl::Span<const uint8_t> bytes,
                                                                const std::string& source);

  const shard::ShardIndex& index() const { return index_; }
  // The tensor called `name` with its index entry, or a NotFound error
  // naming the shard.
  absl::StatusOr<ShardTensor> Tensor(absl::string_view name) const;
  // Recomputes every tensor's XXH3-64; the error names the first mismatch.
  absl::Status VerifyChecksums() const;

 private:
  explicit ShardReader(std::string path) : TensorFile(std::move(path)) {}
  // Checks the index's entries and views their bytes.
  absl::Status AddEntries(absl::Span<const uint8_t> bytes, uint64_t index_offset);

  shard::ShardIndex index_;
};

// Writes one shard, streaming: tensors are appended one at a time, the
// index goes last. Output goes to "<path>.tmp" and is renamed to `path`
// (after fsync of file and directory) only by a successful Finish;
// destroying an unfinished writer deletes the temporary file.
class ShardWriter {
 public:
  static absl::StatusOr<std::unique_ptr<ShardWriter>> Create(const std::string& path);
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // Starts a tensor of `shape` and `dtype`; Append must then supply exactly
  // its bytes before the next BeginTensor or Finish.
  absl::Status BeginTensor(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                           const shard::TensorSplit& split);
  absl::Status Append(absl::Span<const uint8_t> bytes);
  // Completes the file: `index` supplies config, rank, world size, sources
  // (its tensors field is filled here).
  absl::Status Finish(shard::ShardIndex index);

 private:
  explicit ShardWriter(std::unique_ptr<StagedFile> file);
  absl::Status EndTensor();

  std::unique_ptr<StagedFile> file_;
  std::vector<shard::TensorEntry> entries_;
  uint64_t pending_ = 0;  // Bytes the open tensor still expects.
  bool tensor_open_ = false;
  XXH3_state_s* hash_;
};

}  // namespace llama

#endif  // LLAMA_CHECKPOINT_SHARD_FORMAT_H_
