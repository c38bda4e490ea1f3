// Shards for a job, on one node or on several sharing the checkpoint's
// storage: node 0 converts (or finds the conversion up to date); every other
// node waits until the conversion is complete, with progress and a deadline,
// and stops at once if node 0's conversion failed (node 0 leaves the reason
// in "<shard_dir>.failed" for them, marked with the job: a hash of its
// shared token, so a marker from another run is ignored). Nodes that do not share storage each
// see their own folder: node 0 converts there, the others must find theirs
// converted.

#ifndef LLAMA_LAUNCHER_SHARD_PREPARATION_H_
#define LLAMA_LAUNCHER_SHARD_PREPARATION_H_

#include <chrono>
#include <string>

#include "absl/status/statusor.h"
#include "checkpoint/converter.h"

namespace llama {

struct ShardPreparation {
  ConvertOptions convert;
  int node_rank = 0;
  int nnodes = 1;
  // For nodes > 0: how long node 0's conversion may go without progress
  // (its staged shards growing, or its lock held) before they give up.
  std::chrono::seconds deadline{300};
  std::chrono::milliseconds poll{1000};
  std::string job_token;  // The job's shared secret (only a hash of it is written).
};

// The conversion's result (up_to_date for a node that waited).
absl::StatusOr<ConvertResult> PrepareShards(const ShardPreparation& preparation);

// Where a job's shards go when --shard_dir is not given.
struct ShardLocation {
  std::string dir;
  // Set when the shards cannot live next to the checkpoint: says where they
  // went and why, for the user.
  std::string note;
  // The checkpoint is our shards for this world size: run as they are.
  bool as_is = false;
};

// The checkpoint folder itself (as_is) when it holds our shards for the
// world size and no --weights_dtype asks for another type. Else
// "<ckpt_dir>/shards/tp<world_size>" ("tp2-q8_0" with a --weights_dtype;
// "<file>.gguf.shards/tp1" for a GGUF file) when the checkpoint folder is writable
// or already holds that conversion up to date; otherwise (read-only shared
// storage) a folder for this checkpoint under `cache_root` (the launcher
// passes ~/.cache/llama2-cpp/shards), named by the checkpoint's folder name
// and a hash of its absolute path.
absl::StatusOr<ShardLocation> ChooseShardDir(const ConvertOptions& convert, const std::string& cache_root);

// Where node 0 records why its conversion failed.
std::string FailureMarkerPath(const std::string& shard_dir);

}  // namespace llama

#endif  // LLAMA_LAUNCHER_SHARD_PREPARATION_H_
