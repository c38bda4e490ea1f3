// Test-only comparison of two conversions that must agree (resharded vs
// direct, Hugging Face vs Meta's files).

#ifndef LLAMA_CHECKPOINT_SHARD_DIGEST_H_
#define LLAMA_CHECKPOINT_SHARD_DIGEST_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace llama::testing {

// "rank/name" -> "dtype [shape] split-dim:begin-end sha256" for every tensor
// of the `world_size` shards in `dir`, after checking each shard's checksums.
absl::StatusOr<std::map<std::string, std::string>> ShardDigest(const std::string& dir, int world_size);

// A gtest failure unless the shards in `actual` and `expected` have the same
// digest.
void ExpectSameShards(const std::string& actual, const std::string& expected, int world_size);

}  // namespace llama::testing

#endif  // LLAMA_CHECKPOINT_SHARD_DIGEST_H_
