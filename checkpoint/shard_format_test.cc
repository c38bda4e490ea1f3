#include "checkpoint/shard_format.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace llama {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) { return std::string(getenv("TEST_TMPDIR")) + "/" + name; }

std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

shard::ShardIndex TestIndex() {
  shard::ShardIndex index;
  *index.mutable_config() =
      ModelConfigToProto(ModelShape(/*dim=*/8, /*n_layers=*/1, /*n_heads=*/2, /*n_kv_heads=*/2, /*vocab_size=*/16));
  index.set_rank(1);
  index.set_world_size(2);
  index.set_rope_layout(shard::ROPE_LAYOUT_INTERLEAVED);
  return index;
}

// Writes two tensors; returns the path.
std::string WriteTestShard(const std::string& name) {
  const std::string path = TempPath(name);
  absl::StatusOr<std::unique_ptr<ShardWriter>> writer = ShardWriter::Create(path);
  EXPECT_TRUE(writer.ok()) << writer.status();
  std::vector<float> a = {1, 2, 3, 4, 5, 6};
  shard::TensorSplit split;
  split.set_dim(0);
  split.set_begin(2);
  split.set_end(4);
  split.set_full_extent(4);
  EXPECT_TRUE((*writer)->BeginTensor("a", DType::kF32, {2, 3}, split).ok());
  const auto* bytes = reinterpret_cast<const uint8_t*>(a.data());
  EXPECT_TRUE((*writer)->Append({bytes, 8}).ok());  // In pieces, as the converter streams.
  EXPECT_TRUE((*writer)->Append({bytes + 8, 16}).ok());
  std::vector<uint16_t> b = {7, 8, 9};
  split.set_dim(-1);
  EXPECT_TRUE((*writer)->BeginTensor("b", DType::kBF16, {3}, split).ok());
  EXPECT_TRUE((*writer)->Append({reinterpret_cast<const uint8_t*>(b.data()), 6}).ok());
  EXPECT_TRUE((*writer)->Finish(TestIndex()).ok());
  return path;
}

TEST(ShardFormatTest, RoundTrip) {
  const std::string path = WriteTestShard("round_trip.shard");
  EXPECT_NE(access((path + ".tmp").c_str(), F_OK), 0) << "temporary file left behind";
  absl::StatusOr<std::unique_ptr<ShardReader>> reader = ShardReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->index().rank(), 1);
  EXPECT_EQ((*reader)->index().config().vocab_size(), 16);
  absl::StatusOr<ShardTensor> a = (*reader)->Tensor("a");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->dtype, DType::kF32);
  EXPECT_EQ(a->entry->offset() % kShardAlignment, 0u);
  EXPECT_EQ(a->entry->split().begin(), 2);
  EXPECT_EQ(reinterpret_cast<const float*>(a->bytes.data())[5], 6.0f);
  absl::StatusOr<ShardTensor> b = (*reader)->Tensor("b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->entry->offset() % kShardAlignment, 0u);
  EXPECT_EQ(reinterpret_cast<const uint16_t*>(b->bytes.data())[2], 9);
  EXPECT_TRUE((*reader)->VerifyChecksums().ok());
  EXPECT_THAT((*reader)->Tensor("c").status().message(), HasSubstr("no tensor \"c\""));
}

TEST(ShardFormatTest, UnfinishedWriterLeavesNothing) {
  const std::string path = TempPath("abandoned.shard");
  {
    absl::StatusOr<std::unique_ptr<ShardWriter>> writer = ShardWriter::Create(path);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->BeginTensor("a", DType::kF32, {4}, {}).ok());
    EXPECT_THAT((*writer)->Append(std::vector<uint8_t>(20)).message(), HasSubstr("beyond"));
    EXPECT_THAT((*writer)->Finish(TestIndex()).message(), HasSubstr("missing 16 bytes"));
  }
  EXPECT_NE(access(path.c_str(), F_OK), 0);
  EXPECT_NE(access((path + ".tmp").c_str(), F_OK), 0);
}

TEST(ShardFormatTest, CorruptionIsDetected) {
  const std::vector<uint8_t> good = ReadAll(WriteTestShard("corrupt_base.shard"));
  ASSERT_TRUE(ShardReader::FromBytes(good, "s").ok());
  const auto expect_error = [](std::vector<uint8_t> bytes, const char* expected) {
    absl::StatusOr<std::unique_ptr<ShardReader>> reader = ShardReader::FromBytes(bytes, "s.shard");
    EXPECT_FALSE(reader.ok()) << expected;
    EXPECT_THAT(reader.status().message(), HasSubstr(expected));
  };
  std::vector<uint8_t> bad = good;
  bad[0] = 'X';
  expect_error(bad, "bad magic");
  bad = good;
  bad[8] = 9;
  expect_error(bad, "shard format version 9");
  expect_error(std::vector<uint8_t>(good.begin(), good.end() - 5), "outside the file");
  bad = good;
  bad.back() ^= 1;  // Inside the index.
  expect_error(bad, "index checksum mismatch");
  // Tensor bytes: the index still validates, the checksum does not.
  bad = good;
  bad[kShardAlignment] ^= 1;
  absl::StatusOr<std::unique_ptr<ShardReader>> reader = ShardReader::FromBytes(bad, "s.shard");
  ASSERT_TRUE(reader.ok());
  EXPECT_THAT((*reader)->VerifyChecksums().message(), HasSubstr("tensor \"a\" fails its checksum"));
}

// int8 (q8_0) tensors round-trip as whole blocks; rows that are not whole
// blocks are refused on reading, naming the tensor.
TEST(ShardFormatTest, Int8RowsMustBeWholeBlocks) {
  for (const int64_t row : {64, 48}) {
    const std::string path = TempPath(absl::StrCat("q8_", row, ".shard"));
    absl::StatusOr<std::unique_ptr<ShardWriter>> writer = ShardWriter::Create(path);
    ASSERT_TRUE(writer.ok()) << writer.status();
    shard::TensorSplit split;
    split.set_dim(-1);
    ASSERT_TRUE((*writer)->BeginTensor("w", DType::kQ8_0, {2, row}, split).ok());
    const std::vector<uint8_t> blocks(TensorBytes(DType::kQ8_0, 2 * row), 0);
    ASSERT_TRUE((*writer)->Append(blocks).ok());
    ASSERT_TRUE((*writer)->Finish(TestIndex()).ok());
    absl::StatusOr<std::unique_ptr<ShardReader>> reader = ShardReader::Open(path);
    if (row == 64) {
      ASSERT_TRUE(reader.ok()) << reader.status();
      EXPECT_EQ((*reader)->Tensor("w")->bytes.size(), 2u * 2 * 34);
    } else {
      ASSERT_FALSE(reader.ok());
      EXPECT_THAT(reader.status().message(), HasSubstr("tensor \"w\": q8_0 rows of 48 elements; expected a multiple of 32"));
    }
  }
}

TEST(ShardFormatTest, FileName) { EXPECT_EQ(ShardFileName(3, 8), "rank-3-of-8.shard"); }

}  // namespace
}  // namespace llama
