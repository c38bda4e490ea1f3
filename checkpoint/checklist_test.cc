#include "checkpoint/checklist.h"

#include <cstdio>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "checkpoint/checkpoint_fixture.h"

namespace llama {
namespace {

using ::llama::testing::CheckpointFixturePath;
using ::testing::HasSubstr;

TEST(ChecklistTest, ParsesMd5sumOutput) {
  absl::StatusOr<std::vector<ChecklistEntry>> entries = ParseChecklist(
      "0123456789abcdef0123456789ABCDEF  consolidated.00.pth\n"
      "ffffffffffffffffffffffffffffffff *params.json\n\n",
      "c.chk");
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 2u);
  EXPECT_EQ((*entries)[0].md5, "0123456789abcdef0123456789abcdef");
  EXPECT_EQ((*entries)[1].file, "params.json");
  EXPECT_THAT(ParseChecklist("abc  x\n", "c.chk").status().message(), HasSubstr("c.chk:1: expected"));
  EXPECT_THAT(ParseChecklist("", "c.chk").status().message(), HasSubstr("no entries"));
}

// The fixture's checklists were written with Python's hashlib.md5.
TEST(ChecklistTest, VerifiesAGoodDownload) {
  const std::string path = CheckpointFixturePath("tiny_fp32_mp2/checklist.chk");
  absl::StatusOr<std::vector<FileCheck>> checks = VerifyChecklist(path);
  ASSERT_TRUE(checks.ok()) << checks.status();
  EXPECT_EQ(checks->size(), 3u);
  EXPECT_TRUE(ChecklistStatus(path, *checks).ok());
}

// Minutes for a 70B checkpoint: shown as conversion shows its progress.
TEST(ChecklistTest, ShowsProgressWhenAsked) {
  const std::string path = CheckpointFixturePath("tiny_fp32_mp2/checklist.chk");
  FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  ASSERT_TRUE(VerifyChecklist(path, out).ok());
  std::rewind(out);
  char line[512] = {};
  ASSERT_NE(std::fgets(line, sizeof line, out), nullptr);
  std::fclose(out);
  EXPECT_THAT(line, HasSubstr("verify " + path + ": "));
  EXPECT_THAT(line, HasSubstr("(100%)"));
}

TEST(ChecklistTest, ReportsCorruptAndMissingFiles) {
  const std::string corrupt = CheckpointFixturePath("broken/bad_checksum/checklist.chk");
  absl::Status status = ChecklistStatus(corrupt, *VerifyChecklist(corrupt));
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("1 of 2 files failed: consolidated.00.pth is corrupt or truncated"));
  const std::string missing = CheckpointFixturePath("broken/missing_shard/checklist.chk");
  EXPECT_THAT(ChecklistStatus(missing, *VerifyChecklist(missing)).message(),
              HasSubstr("consolidated.01.pth is missing"));
  EXPECT_EQ(VerifyChecklist("/nonexistent/checklist.chk").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace llama
