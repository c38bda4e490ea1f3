// The GGUF reader on files our writer makes, and on damaged headers.

#include "checkpoint/gguf_reader.h"

#include <fstream>
#include <iterator>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "checkpoint/gguf_writer.h"

namespace llama {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string TempPath(const std::string& name) { return std::string(getenv("TEST_TMPDIR")) + "/" + name; }

// A small file: three kinds of metadata, an f32 matrix and a q8_0 row.
std::string WriteSample() {
  const std::string path = TempPath("sample.gguf");
  GgufMetadata metadata;
  metadata.AddString("general.architecture", "llama");
  metadata.AddU32("llama.block_count", 2);
  metadata.AddStringArray("tokenizer.ggml.tokens", {"<unk>", "<s>", "▁Hello"});
  absl::StatusOr<std::unique_ptr<GgufWriter>> writer =
      GgufWriter::Create(path, metadata, {{"token_embd.weight", DType::kF32, {3, 2}}, {"q", DType::kQ8_0, {1, 32}}});
  EXPECT_TRUE(writer.ok()) << writer.status();
  EXPECT_TRUE((*writer)->Append(std::vector<uint8_t>(24, 0)).ok());
  EXPECT_TRUE((*writer)->Append(std::vector<uint8_t>(34, 0)).ok());
  EXPECT_TRUE((*writer)->Finish().ok());
  return path;
}

std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

TEST(GgufReaderTest, ReadsWhatTheWriterWrote) {
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(WriteSample());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->version(), 3u);
  ASSERT_EQ((*file)->metadata().size(), 3u);
  EXPECT_EQ((*file)->metadata()[0].first, "general.architecture");
  EXPECT_EQ((*file)->metadata()[0].second, "llama");
  EXPECT_EQ((*file)->metadata()[1].second, 2);
  EXPECT_EQ((*file)->metadata()[2].second, nlohmann::json({"<unk>", "<s>", "▁Hello"}));
  ASSERT_EQ((*file)->tensors().size(), 2u);
  const GgufTensorInfo& embedding = (*file)->tensors()[0];
  EXPECT_EQ(embedding.name, "token_embd.weight");
  EXPECT_THAT(embedding.shape, ElementsAre(3, 2));  // Row-major again.
  EXPECT_EQ(GgmlTypeName(embedding.ggml_type), "F32");
  EXPECT_EQ(GgmlTypeName((*file)->tensors()[1].ggml_type), "Q8_0");
  EXPECT_EQ((*file)->data_offset() % kGgufAlignment, 0u);
  EXPECT_EQ(GgmlTypeName(99), "type 99");
}

TEST(GgufReaderTest, DamagedHeadersAreRefusedNamingWhere) {
  const std::vector<uint8_t> good = ReadBytes(WriteSample());
  const auto read = [](std::vector<uint8_t> bytes) {
    return std::string(GgufFile::FromBytes(bytes, "x.gguf").status().message());
  };
  EXPECT_THAT(read({'P', 'K', 3, 4, 0, 0, 0, 0}), HasSubstr("x.gguf: GGUF header at byte 4: expected the magic"));
  // Cut in the counts, in the vocabulary, then before the last tensor's bytes.
  EXPECT_THAT(read(std::vector<uint8_t>(good.begin(), good.begin() + 10)),
              HasSubstr("at byte 8: the file ends (8 bytes wanted)"));
  EXPECT_THAT(read(std::vector<uint8_t>(good.begin(), good.begin() + 150)),
              HasSubstr("runs past the end (metadata key \"tokenizer.ggml.tokens\")"));
  EXPECT_THAT(read(std::vector<uint8_t>(good.begin(), good.end() - 1)),
              HasSubstr("tensor \"q\" (Q8_0, 34 bytes at data offset 32) runs past the end"));
  // A metadata count no file could hold is refused before allocating.
  std::vector<uint8_t> huge = good;
  std::fill(huge.begin() + 16, huge.begin() + 24, 0xff);
  EXPECT_THAT(read(huge), HasSubstr("metadata entries cannot fit"));
  std::vector<uint8_t> version = good;
  version[4] = 1;
  EXPECT_THAT(read(version), HasSubstr("version 1; expected 2 or 3"));
}

}  // namespace
}  // namespace llama
