// The GGUF writer's refusals; the files it writes are read back and loaded
// by llama.cpp in tests/gguf_export_test.cc.

#include "checkpoint/gguf_writer.h"

#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace llama {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string TempPath(const std::string& name) { return std::string(getenv("TEST_TMPDIR")) + "/" + name; }

TEST(GgufWriterTest, EveryTensorMustGetExactlyItsBytes) {
  const std::string path = TempPath("short.gguf");
  {
    absl::StatusOr<std::unique_ptr<GgufWriter>> writer =
        GgufWriter::Create(path, GgufMetadata(), {{"a", DType::kF32, {2}}, {"b", DType::kF16, {3}}});
    ASSERT_TRUE(writer.ok()) << writer.status();
    const uint8_t bytes[14] = {};
    ASSERT_TRUE((*writer)->Append(absl::MakeConstSpan(bytes, 8)).ok());  // All of a.
    absl::Status finish = (*writer)->Finish();
    EXPECT_THAT(finish.message(), HasSubstr("tensor \"b\" is missing 6 bytes"));
    ASSERT_TRUE((*writer)->Append(absl::MakeConstSpan(bytes, 6)).ok());
    EXPECT_THAT((*writer)->Append(absl::MakeConstSpan(bytes, 1)).message(),
                HasSubstr("1 bytes appended after the last tensor"));
  }  // Dropped unfinished: nothing is left.
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".partial"));
}

TEST(GgufWriterTest, TypesGgmlLacksAreRefused) {
  absl::StatusOr<std::unique_ptr<GgufWriter>> writer =
      GgufWriter::Create(TempPath("i64.gguf"), GgufMetadata(), {{"ids", DType::kI64, {4}}});
  ASSERT_FALSE(writer.ok());
  EXPECT_THAT(writer.status().message(), HasSubstr("GGUF export: i64 tensors are not supported"));
  EXPECT_FALSE(fs::exists(TempPath("i64.gguf.partial")));
}

TEST(GgufWriterTest, CompleteFileAppearsAtFinish) {
  const std::string path = TempPath("done.gguf");
  absl::StatusOr<std::unique_ptr<GgufWriter>> writer =
      GgufWriter::Create(path, GgufMetadata(), {{"q", DType::kQ8_0, {1, 32}}});
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_FALSE(fs::exists(path));
  const std::vector<uint8_t> block(34, 1);
  ASSERT_TRUE((*writer)->Append(block).ok());
  ASSERT_TRUE((*writer)->Finish().ok());
  EXPECT_TRUE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".partial"));
}

}  // namespace
}  // namespace llama
