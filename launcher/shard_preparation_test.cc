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

// A folder of our shards for the job's world size runs as it is; another
// world size, or another --weights_dtype, converts into shards/tpN as any
// checkpoint does.
TEST(ShardPreparationTest, ShardsForTheWorldSizeRunAsTheyAre) {
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/own_shards";
  ConvertOptions convert;
  convert.ckpt_dir = CheckpointFixturePath("tiny_fp32_mp1");
  convert.out_dir = dir;
  convert.world_size = 2;
  convert.show_progress = false;
  ASSERT_TRUE(ConvertCheckpoint(convert).ok());
  convert.ckpt_dir = dir;
  convert.out_dir.clear();
  absl::StatusOr<ShardLocation> same = ChooseShardDir(convert, "/nonexistent");
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_TRUE(same->as_is);
  EXPECT_EQ(same->dir, fs::canonical(dir).string());
  convert.world_size = 1;
  absl::StatusOr<ShardLocation> other = ChooseShardDir(convert, "/nonexistent");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_FALSE(other->as_is);
  EXPECT_EQ(other->dir, fs::canonical(dir).string() + "/shards/tp1");
  convert.world_size = 2;
  convert.dtype = DType::kF16;
  EXPECT_FALSE(ChooseShardDir(convert, "/nonexistent")->as_is);
  fs::remove(dir + "/rank-1-of-2.shard");
  convert.dtype.reset();
  EXPECT_FALSE(ChooseShardDir(convert, "/nonexistent")->as_is) << "a rank's shard is missing";
}

}  // namespace
}  // namespace llama
