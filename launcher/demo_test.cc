#include "launcher/demo.h"

#include <atomic>
#include <filesystem>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace llama {
namespace {

namespace fs = std::filesystem;

// First runs at once (two shells, two nodes on a shared $HOME): all get the
// one demo checkpoint, none fails on the other's half-made folder.
TEST(DemoTest, RunsStartedTogetherAllGetTheCheckpoint) {
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/demo";
  std::vector<absl::StatusOr<DemoCheckpoint>> made(3, absl::UnknownError("not run"));
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (auto& m : made) {
    threads.emplace_back([&] {
      ++ready;
      while (ready < static_cast<int>(made.size())) std::this_thread::yield();
      m = PrepareDemoCheckpoint(dir);
    });
  }
  for (std::thread& t : threads) t.join();
  for (const auto& m : made) {
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_TRUE(fs::exists(m->ckpt_dir + "/consolidated.00.pth"));
    EXPECT_TRUE(fs::exists(m->tokenizer_path));
  }
  EXPECT_FALSE(fs::exists(dir + ".partial"));
}

}  // namespace
}  // namespace llama
