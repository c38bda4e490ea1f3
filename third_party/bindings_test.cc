// Calls into each system library the workspace binds, through its Bazel
// target, and checks the answer.

#include <string>
#include <vector>

#include <gflags/gflags.h>
#include <glog/logging.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "third_party/bindings_test.pb.h"

DEFINE_int32(bindings_test_answer, 42, "A flag this test reads back.");

namespace {

absl::StatusOr<int> ParsePositive(int value) {
  if (value <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat("expected > 0, got %d", value));
  }
  return value;
}

TEST(BindingsTest, Abseil) {
  EXPECT_EQ(*ParsePositive(3), 3);
  absl::StatusOr<int> bad = ParsePositive(-1);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "expected > 0, got -1");
  absl::flat_hash_map<std::string, int> counts;
  for (absl::string_view word : absl::StrSplit("a b a", ' ')) ++counts[word];
  EXPECT_EQ(counts["a"], 2);
}

TEST(BindingsTest, Protobuf) {
  llama::bindings_test::Probe probe;
  probe.set_name("tok_embeddings.weight");
  probe.add_shape(32000);
  probe.add_shape(4096);
  std::string wire;
  ASSERT_TRUE(probe.SerializeToString(&wire));
  llama::bindings_test::Probe back;
  ASSERT_TRUE(back.ParseFromString(wire));
  EXPECT_EQ(back.name(), "tok_embeddings.weight");
  EXPECT_EQ(back.shape(1), 4096);
}

TEST(BindingsTest, GlogAndGflags) {
  EXPECT_EQ(FLAGS_bindings_test_answer, 42);
  gflags::FlagSaver saver;
  EXPECT_FALSE(gflags::SetCommandLineOption("bindings_test_answer", "7").empty());
  EXPECT_EQ(FLAGS_bindings_test_answer, 7);
  EXPECT_DEATH(CHECK_EQ(1, 2) << "probe", "Check failed: 1 == 2");
  LOG(INFO) << "glog is linked";
}

TEST(BindingsTest, Zlib) {
  const std::string data = "123456789";
  // The CRC-32 check value of "123456789" (ISO-HDLC).
  EXPECT_EQ(crc32(0, reinterpret_cast<const Bytef*>(data.data()), data.size()), 0xCBF43926u);
}

}  // namespace
