#include "checkpoint/shard_digest.h"

#include <memory>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "checkpoint/checkpoint_fixture.h"
#include "checkpoint/shard_format.h"

namespace llama::testing {

absl::StatusOr<std::map<std::string, std::string>> ShardDigest(const std::string& dir, int world_size) {
  std::map<std::string, std::string> digest;
  for (int rank = 0; rank < world_size; ++rank) {
    ASSIGN_OR_RETURN(std::unique_ptr<ShardReader> reader,
                     ShardReader::Open(dir + "/" + ShardFileName(rank, world_size)));
    RETURN_IF_ERROR(reader->VerifyChecksums());
    for (const shard::TensorEntry& e : reader->index().tensors()) {
      ASSIGN_OR_RETURN(ShardTensor tensor, reader->Tensor(e.name()));
      digest[absl::StrCat(rank, "/", e.name())] =
          absl::StrCat(e.dtype(), " [", absl::StrJoin(e.shape(), ","), "] ", e.split().dim(), ":", e.split().begin(),
                       "-", e.split().end(), " ", Sha256Hex(tensor.bytes));
    }
  }
  return digest;
}

void ExpectSameShards(const std::string& actual, const std::string& expected, int world_size) {
  const absl::StatusOr<std::map<std::string, std::string>> a = ShardDigest(actual, world_size);
  const absl::StatusOr<std::map<std::string, std::string>> b = ShardDigest(expected, world_size);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(a->size(), b->size()) << actual << " vs " << expected;
  EXPECT_EQ(*a, *b) << actual << " vs " << expected;
}

}  // namespace llama::testing
