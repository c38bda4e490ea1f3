#include "base/file_lock.h"

#include <unistd.h>

#include <atomic>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <thread>
#include <vector>

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
  EXPECT_FALSE(std::filesystem::exists(LockPath())) << "the lock file is left behind";
  EXPECT_FALSE(FileLock::IsHeld(LockPath()));
  absl::StatusOr<FileLock> again = FileLock::Acquire(LockPath());
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(FileLock::IsHeld(LockPath()));
}

// Many takers in turn: each holds it alone, and none is left waiting on a
// file its holder removed.
TEST(FileLockTest, TakersInTurnEachHoldItAlone) {
  std::atomic<int> holders{0}, most{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      for (int round = 0; round < 20; ++round) {
        absl::StatusOr<FileLock> lock = FileLock::Acquire(LockPath());
        ASSERT_TRUE(lock.ok()) << lock.status();
        most = std::max(most.load(), ++holders);
        std::this_thread::yield();
        --holders;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(most, 1);
}

TEST(FileLockTest, AFolderThatIsNotThereIsAnErrorNamingTheFile) {
  absl::StatusOr<FileLock> lock = FileLock::Acquire("/nonexistent-folder/x.lock");
  ASSERT_FALSE(lock.ok());
  EXPECT_THAT(lock.status().message(), HasSubstr("/nonexistent-folder/x.lock"));
}

}  // namespace
}  // namespace llama
