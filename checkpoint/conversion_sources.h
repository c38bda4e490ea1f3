// The sources of a conversion, opened and checked: Meta's
// consolidated.NN.pth files, a Hugging Face folder, a GGUF file or our own
// rank-R-of-N.shard files (to reshard), reduced to the pieces ("parts") of every tensor, with the
// model config and a record of each file for the up-to-date check.
// Internal to the converter.

#ifndef LLAMA_CHECKPOINT_CONVERSION_SOURCES_H_
#define LLAMA_CHECKPOINT_CONVERSION_SOURCES_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "checkpoint/gguf_reader.h"
#include "checkpoint/model_config.h"
#include "checkpoint/shard.pb.h"
#include "checkpoint/tensor_file.h"
#include "ops/dtype.h"

namespace llama {

// One source's piece of a tensor: indices [begin, end) of the split
// dimension of the full tensor (the whole tensor when replicated).
struct SourcePart {
  absl::Span<const uint8_t> bytes;
  DType dtype;
  std::vector<int64_t> shape;
  int64_t begin = 0;
  int64_t end = 0;
  // For a part split on rows (dim 0) whose rows are stored in another
  // order: the stored row of each row [begin, end); empty when in order.
  std::vector<int64_t> row_order;
  // A GGUF tensor of one of ggml's block types (ops/ggml_blocks.h), decoded
  // row by row; `dtype` is then what it converts to unless told otherwise.
  // (Q8_0 and Q4_K are our kQ8_0 and kQ4_K: converted to those, their
  // bytes are copied.)
  std::optional<uint32_t> ggml_block_type = std::nullopt;
};

struct SourceSet {
  ModelConfig config;
  std::vector<shard::SourceFile> records;  // For the up-to-date check.
  // The weight files read (.pth, shards, safetensors), kept open: the
  // parts view their bytes.
  std::vector<std::unique_ptr<TensorFile>> files;
  // Or the GGUF file read, kept open likewise; its metadata holds the
  // tokenizer.
  std::unique_ptr<GgufFile> gguf;

  int file_count() const { return gguf != nullptr ? 1 : files.size(); }
  absl::flat_hash_map<std::string, std::vector<SourcePart>> parts;
};

// Shared by the openers below.
// The file's record (name, size, mtime) for the up-to-date check.
absl::StatusOr<shard::SourceFile> DescribeSourceFile(const std::string& dir, const std::string& name);
// A tensor `name` of `file` has the `expected` shape (`why`: where that
// comes from) and a float type.
absl::Status CheckPart(const std::string& file, absl::string_view name, const std::vector<int64_t>& shape,
                       DType dtype, const std::vector<int64_t>& expected, const std::string& why);

// Names in `dir` of the form <prefix><number><suffix>, by number.
std::map<int, std::string> NumberedFiles(const std::string& dir, absl::string_view prefix,
                                         absl::string_view suffix);
// Our rank-R-of-N.shard files, by R.
std::map<int, std::string> ShardFiles(const std::string& dir);

// Meta's consolidated.NN.pth files in `dir` (`found`: NumberedFiles'
// answer): shards must be complete, agree on dtypes and replicated values,
// and match params.json.
absl::StatusOr<SourceSet> OpenMetaCheckpoint(const std::string& dir, const std::map<int, std::string>& found);
// True when `dir` holds a Hugging Face model: config.json and weights
// (model.safetensors, sharded safetensors with their index, or
// pytorch_model*.bin).
bool IsHuggingFaceFolder(const std::string& dir);
// A Hugging Face Llama folder: names mapped to Meta's, query and key rows
// put back into Meta's interleaved rotary order, the config from
// config.json, a tied output projection read from the embedding. `dir`
// must pass IsHuggingFaceFolder.
absl::StatusOr<SourceSet> OpenHuggingFaceCheckpoint(const std::string& dir);
// The GGUF file `ckpt_dir` names: itself when it is a .gguf file, else the
// one .gguf file in the folder (none or several is an error).
absl::StatusOr<std::string> FindGgufFile(const std::string& ckpt_dir);
// A GGUF file of llama.cpp's "llama" architecture (see gguf_sources.cc).
absl::StatusOr<SourceSet> OpenGgufCheckpoint(const std::string& path);
// Our shards in `dir` (`found`: ShardFiles' answer), all of one conversion.
absl::StatusOr<SourceSet> OpenShardFolder(const std::string& dir, const std::map<int, std::string>& found);

}  // namespace llama

#endif  // LLAMA_CHECKPOINT_CONVERSION_SOURCES_H_
