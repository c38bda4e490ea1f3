#include "checkpoint/pth_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "checkpoint/checkpoint_fixture.h"

namespace llama {
namespace {

using ::llama::testing::CheckpointFixturePath;
using ::llama::testing::CheckpointManifest;
using ::llama::testing::Sha256Hex;
using ::testing::HasSubstr;

// Every tensor of every fixture file, against PyTorch's own view of it:
// same names, dtypes and shapes, and bit-identical bytes.
TEST(PthReaderTest, EveryTensorMatchesPyTorch) {
  int checked = 0;
  for (const auto& [file, tensors] : CheckpointManifest().items()) {
    absl::StatusOr<std::unique_ptr<PthFile>> pth = PthFile::Open(CheckpointFixturePath(file));
    ASSERT_TRUE(pth.ok()) << pth.status();
    EXPECT_EQ((*pth)->tensors().size(), tensors.size()) << file;
    for (const auto& [name, expected] : tensors.items()) {
      const FileTensor* tensor = (*pth)->Find(name);
      ASSERT_NE(tensor, nullptr) << file << ": " << name;
      EXPECT_EQ(DTypeName(tensor->dtype), expected["dtype"].get<std::string>()) << name;
      EXPECT_EQ(tensor->shape, expected["shape"].get<std::vector<int64_t>>()) << name;
      EXPECT_EQ(Sha256Hex(tensor->bytes), expected["sha256"].get<std::string>()) << file << ": " << name;
      ++checked;
    }
  }
  EXPECT_GT(checked, 100);
}

TEST(PthReaderTest, ViewsIntoASharedStorageHonourOffsets) {
  absl::StatusOr<std::unique_ptr<PthFile>> pth = PthFile::Open(CheckpointFixturePath("odd/good_custom.pth"));
  ASSERT_TRUE(pth.ok()) << pth.status();
  const FileTensor* w = (*pth)->Find("w");
  ASSERT_NE(w, nullptr);
  ASSERT_EQ(w->bytes.size(), 6 * sizeof(float));
  const float* values = reinterpret_cast<const float*>(w->bytes.data());
  for (int i = 0; i < 6; ++i) EXPECT_EQ(values[i], 4.0f + i);
}

struct BadFile {
  const char* file;
  absl::StatusCode code;
  const char* expected;
};

class PthReaderBadInputTest : public ::testing::TestWithParam<BadFile> {};

TEST_P(PthReaderBadInputTest, ClearError) {
  const BadFile& bad = GetParam();
  const std::string path = CheckpointFixturePath(bad.file);
  absl::StatusOr<std::unique_ptr<PthFile>> pth = PthFile::Open(path);
  EXPECT_EQ(pth.status().code(), bad.code) << pth.status();
  EXPECT_THAT(pth.status().message(), HasSubstr(path));
  EXPECT_THAT(pth.status().message(), HasSubstr(bad.expected));
}

INSTANTIATE_TEST_SUITE_P(
    Files, PthReaderBadInputTest,
    ::testing::Values(
        BadFile{"odd/legacy.pth", absl::StatusCode::kInvalidArgument, "legacy (pre-1.6, non-zip) format"},
        BadFile{"odd/noncontiguous.pth", absl::StatusCode::kUnimplemented,
                "tensor \"t\" is not contiguous (shape [3, 2], strides [1, 3])"},
        BadFile{"odd/bad_offset.pth", absl::StatusCode::kInvalidArgument,
                "tensor \"w\": elements [20, +8) run past its storage of 24 elements"},
        BadFile{"odd/bad_numel.pth", absl::StatusCode::kInvalidArgument,
                "claims 100 elements of f32 but the record holds 96 bytes"},
        BadFile{"odd/bad_shape.pth", absl::StatusCode::kInvalidArgument,
                "elements [0, +30) run past its storage of 24 elements"},
        BadFile{"odd/missing_storage.pth", absl::StatusCode::kInvalidArgument,
                "storage record data/7 is missing"},
        BadFile{"does_not_exist.pth", absl::StatusCode::kNotFound, "No such file"}));

TEST(PthReaderTest, NumElementsChecksOverflow) {
  EXPECT_EQ(*NumElements({2, 3, 4}, "t"), 24);
  EXPECT_EQ(*NumElements({}, "t"), 1);
  EXPECT_EQ(*NumElements({5, 0}, "t"), 0);
  EXPECT_THAT(NumElements({1LL << 40, 1LL << 40}, "t").status().message(), HasSubstr("overflows"));
  EXPECT_THAT(NumElements({-1}, "t").status().message(), HasSubstr("negative"));
}

}  // namespace
}  // namespace llama
