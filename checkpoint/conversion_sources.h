// The sources of a conversion, opened and checked: Meta's
// consolidated.NN.pth files or our own rank-R-of-N.shard files (to
// reshard), reduced to the pieces ("parts") of every tensor, with the
// model config and a record of each file for the up-to-date check.
// Internal to the converter.

#ifndef LLAMA_CHECKPOINT_CONVERSION_SOURCES_H_
#define LLAMA_CHECKPOINT_CONVERSION_SOURCES_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "checkpoint/model_config.h"
#include "checkpoint/pth_reader.h"
#include "checkpoint/shard.pb.h"
#include "checkpoint/shard_format.h"
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
};

struct SourceSet {
  ModelConfig config;
  std::vector<shard::SourceFile> records;  // For the up-to-date check.
  std::vector<std::unique_ptr<PthFile>> pth_files;
  std::vector<std::unique_ptr<ShardReader>> shards;
  absl::flat_hash_map<std::string, std::vector<SourcePart>> parts;
};

// Names in `dir` of the form <prefix><number><suffix>, by number.
std::map<int, std::string> NumberedFiles(const std::string& dir, absl::string_view prefix,
                                         absl::string_view suffix);
// Our rank-R-of-N.shard files, by R.
std::map<int, std::string> ShardFiles(const std::string& dir);

// Meta's consolidated.NN.pth files in `dir` (`found`: NumberedFiles'
// answer): shards must be complete, agree on dtypes and replicated values,
// and match params.json.
absl::StatusOr<SourceSet> OpenMetaCheckpoint(const std::string& dir, const std::map<int, std::string>& found);
// Our shards in `dir` (`found`: ShardFiles' answer), all of one conversion.
absl::StatusOr<SourceSet> OpenShardFolder(const std::string& dir, const std::map<int, std::string>& found);

}  // namespace llama

#endif  // LLAMA_CHECKPOINT_CONVERSION_SOURCES_H_
