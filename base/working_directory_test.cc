#include "base/working_directory.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace llama {
namespace {

TEST(WorkingDirectoryTest, EntersTheFolderBazelRunNamesOrSaysWhyNot) {
  const std::string typed_in = std::filesystem::canonical(std::getenv("TEST_TMPDIR")).string();
  ASSERT_EQ(setenv("BUILD_WORKING_DIRECTORY", typed_in.c_str(), 1), 0);
  ASSERT_TRUE(EnterBazelRunWorkingDirectory().ok());
  EXPECT_EQ(std::filesystem::current_path().string(), typed_in);
  ASSERT_EQ(setenv("BUILD_WORKING_DIRECTORY", "/nonexistent/folder", 1), 0);
  const absl::Status status = EnterBazelRunWorkingDirectory();
  EXPECT_THAT(status.message(),
              ::testing::HasSubstr("cannot enter BUILD_WORKING_DIRECTORY /nonexistent/folder (where bazel run was typed)"));
  ASSERT_EQ(unsetenv("BUILD_WORKING_DIRECTORY"), 0);
  EXPECT_TRUE(EnterBazelRunWorkingDirectory().ok());  // Not under bazel run: nothing changes.
  EXPECT_EQ(std::filesystem::current_path().string(), typed_in);
}

}  // namespace
}  // namespace llama
