#include "checkpoint/zip_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "checkpoint/checkpoint_fixture.h"

namespace llama {
namespace {

using ::llama::testing::CheckpointFixturePath;
using ::llama::testing::ReadFileBytes;
using ::testing::HasSubstr;

std::vector<uint8_t> RealShard() {
  return ReadFileBytes(CheckpointFixturePath("tiny_fp32_mp1/consolidated.00.pth"));
}

TEST(ZipReaderTest, ReadsTorchSaveArchive) {
  const std::vector<uint8_t> bytes = RealShard();
  absl::StatusOr<ZipArchive> archive = ZipArchive::Parse(bytes, "shard");
  ASSERT_TRUE(archive.ok()) << archive.status();
  const ZipEntry* pickle = archive->Find("consolidated.00/data.pkl");
  ASSERT_NE(pickle, nullptr);
  EXPECT_EQ(archive->Data(*pickle)[0], 0x80);  // PROTO
  ASSERT_NE(archive->Find("consolidated.00/version"), nullptr);
  // torch.save aligns tensor data to 64 bytes through local-header padding.
  for (const ZipEntry& entry : archive->entries()) {
    if (entry.name.find("/data/") != std::string::npos) {
      EXPECT_EQ(entry.data_offset % 64, 0u) << entry.name;
    }
  }
}

// The same archive rewritten with zip64 records (sizes and offsets all
// 0xFFFFFFFF in the 32-bit fields) gives the same entries and bytes.
TEST(ZipReaderTest, Zip64MatchesPlainArchive) {
  const std::vector<uint8_t> plain_bytes = RealShard();
  const std::vector<uint8_t> zip64_bytes = ReadFileBytes(CheckpointFixturePath("odd/zip64.pth"));
  absl::StatusOr<ZipArchive> plain = ZipArchive::Parse(plain_bytes, "plain");
  absl::StatusOr<ZipArchive> zip64 = ZipArchive::Parse(zip64_bytes, "zip64");
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(zip64.ok()) << zip64.status();
  ASSERT_EQ(plain->entries().size(), zip64->entries().size());
  for (const ZipEntry& entry : plain->entries()) {
    const ZipEntry* other = zip64->Find(entry.name);
    ASSERT_NE(other, nullptr) << entry.name;
    absl::Span<const uint8_t> a = plain->Data(entry), b = zip64->Data(*other);
    EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin(), b.end())) << entry.name;
  }
}

TEST(ZipReaderTest, TruncatedArchivesAreRejected) {
  const std::vector<uint8_t> bytes = RealShard();
  for (size_t keep : {size_t{0}, size_t{10}, bytes.size() / 2, bytes.size() - 1}) {
    absl::StatusOr<ZipArchive> archive =
        ZipArchive::Parse(absl::MakeConstSpan(bytes.data(), keep), "cut.pth");
    EXPECT_FALSE(archive.ok()) << keep;
    EXPECT_THAT(archive.status().message(), HasSubstr("cut.pth: not a valid zip archive")) << keep;
  }
}

TEST(ZipReaderTest, CorruptCentralDirectoryIsRejected) {
  std::vector<uint8_t> bytes = RealShard();
  absl::StatusOr<ZipArchive> archive = ZipArchive::Parse(bytes, "x");
  ASSERT_TRUE(archive.ok());
  // Find the central directory from the end record and damage its first entry.
  size_t eocd = bytes.size() - 22;
  while (!(bytes[eocd] == 0x50 && bytes[eocd + 1] == 0x4B && bytes[eocd + 2] == 5 && bytes[eocd + 3] == 6)) --eocd;
  const uint32_t cd = bytes[eocd + 16] | bytes[eocd + 17] << 8 | bytes[eocd + 18] << 16 | bytes[eocd + 19] << 24;
  std::vector<uint8_t> bad_signature = bytes;
  bad_signature[cd] ^= 0xFF;
  EXPECT_THAT(ZipArchive::Parse(bad_signature, "c.pth").status().message(),
              HasSubstr("corrupt central directory entry"));
  std::vector<uint8_t> bad_offset = bytes;
  bad_offset[cd + 45] = 0x7F;  // Local header offset far past the end.
  EXPECT_THAT(ZipArchive::Parse(bad_offset, "c.pth").status().message(),
              HasSubstr("local header at offset"));
  std::vector<uint8_t> compressed = bytes;
  compressed[cd + 10] = 8;  // Deflate.
  EXPECT_THAT(ZipArchive::Parse(compressed, "c.pth").status().message(), HasSubstr("is compressed"));
  std::vector<uint8_t> bad_size = bytes;
  bad_size[cd + 23] = bad_size[cd + 27] = 0x70;  // Entry larger than the file.
  EXPECT_THAT(ZipArchive::Parse(bad_size, "c.pth").status().message(), HasSubstr("runs past the end"));
}

}  // namespace
}  // namespace llama
