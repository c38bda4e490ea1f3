#include "launcher/shard_preparation.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/file_lock.h"
#include "checkpoint/checkpoint_fixture.h"

namespace llama {
namespace {

namespace fs = std::filesystem;
using ::llama::testing::CheckpointFixturePath;
using ::testing::HasSubstr;

ShardPreparation NodeOne(const std::string& out) {
  ShardPreparation p;
  p.convert.ckpt_dir = CheckpointFixturePath("tiny_fp32_mp1");
  p.convert.out_dir = out;
  p.convert.world_size = 2;
  p.node_rank = 1;
  p.nnodes = 2;
  p.deadline = std::chrono::seconds(1);
  p.poll = std::chrono::milliseconds(20);
  return p;
}

// Node 0 stages for longer than the deadline, growing its shards all the
// while; node 1 waits it out and gets the finished conversion.
TEST(ShardPreparationTest, AWaitingNodeWaitsAsLongAsNodeZeroMakesProgress) {
  const std::string out = std::string(getenv("TEST_TMPDIR")) + "/progress";
  absl::StatusOr<ConvertResult> waited = absl::UnknownError("not run");
  std::thread node_one([&] { waited = PrepareShards(NodeOne(out)); });
  fs::create_directories(out + ".partial");
  {
    std::ofstream staged(out + ".partial/rank-0-of-2.shard");
    for (int i = 0; i < 25; ++i) {  // 2.5 s: more than the deadline.
      staged << std::string(1000, 'x') << std::flush;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  fs::remove_all(out + ".partial");
  ShardPreparation node_zero = NodeOne(out);
  node_zero.node_rank = 0;
  ASSERT_TRUE(PrepareShards(node_zero).ok());
  node_one.join();
  ASSERT_TRUE(waited.ok()) << waited.status();
  EXPECT_TRUE(waited->up_to_date);
}

// Node 0 holds the conversion's lock while it checks checklist.chk,
// staging nothing: node 1 waits that out too.
TEST(ShardPreparationTest, AWaitingNodeWaitsWhileNodeZeroHoldsTheLock) {
  const std::string out = std::string(getenv("TEST_TMPDIR")) + "/locked";
  absl::StatusOr<FileLock> lock = FileLock::Acquire(out + ".lock");
  ASSERT_TRUE(lock.ok()) << lock.status();
  absl::StatusOr<ConvertResult> waited = absl::UnknownError("not run");
  std::thread node_one([&] { waited = PrepareShards(NodeOne(out)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // More than the deadline.
  *lock = FileLock::Acquire(out + ".other-lock").value();        // Lets go of the conversion's.
  ShardPreparation node_zero = NodeOne(out);
  node_zero.node_rank = 0;
  ASSERT_TRUE(PrepareShards(node_zero).ok());
  node_one.join();
  ASSERT_TRUE(waited.ok()) << waited.status();
}

TEST(ShardPreparationTest, AWaitingNodeGivesUpWhenNodeZeroMakesNoProgress) {
  const std::string out = std::string(getenv("TEST_TMPDIR")) + "/stalled";
  fs::create_directories(out + ".partial");
  std::ofstream(out + ".partial/rank-0-of-2.shard") << "a start, then nothing";
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<ConvertResult> waited = PrepareShards(NodeOne(out));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  ASSERT_FALSE(waited.ok());
  EXPECT_EQ(waited.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(waited.status().message(), HasSubstr("with no progress for the last 1 s"));
}

}  // namespace
}  // namespace llama
