#include "base/file_lock.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace llama {
namespace {

using ::testing::HasSubstr;

std::string LockPath() { return std::string(getenv("TEST_TMPDIR")) + "/out.lock"; }

TEST(FileLockTest, ASecondHolderWaitsForTheFirstAndIsToldWhoHoldsIt) {
  std::atomic<bool> released{false};
  std::optional<FileLock> first;
  {
    absl::StatusOr<FileLock> lock = FileLock::Acquire(LockPath());
    ASSERT_TRUE(lock.ok()) << lock.status();
    first.emplace(*std::move(lock));
  }
  std::string holder;
  std::atomic<bool> got{false};
  std::thread second([&] {
    absl::StatusOr<FileLock> lock = FileLock::Acquire(LockPath(), [&](const std::string& h) { holder = h; });
    EXPECT_TRUE(lock.ok()) << lock.status();
    EXPECT_TRUE(released) << "the lock was taken while held";
    got = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(got);
  released = true;
  first.reset();
  second.join();
  EXPECT_TRUE(got);
  EXPECT_THAT(holder, HasSubstr(absl::StrCat("pid ", getpid())));
}

TEST(FileLockTest, AFolderThatIsNotThereIsAnErrorNamingTheFile) {
  absl::StatusOr<FileLock> lock = FileLock::Acquire("/nonexistent-folder/x.lock");
  ASSERT_FALSE(lock.ok());
  EXPECT_THAT(lock.status().message(), HasSubstr("/nonexistent-folder/x.lock"));
}

}  // namespace
}  // namespace llama
