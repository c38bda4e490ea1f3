#include "ops/ggml_blocks.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/durable_file.h"

namespace llama {
namespace {

// testdata/ggml_blocks: 3 rows of 512 values quantized by llama.cpp's
// ggml_quantize_chunk and decoded by its own to_float (gen_blocks.c).
constexpr int kRows = 3, kCols = 512;

struct Expected {
  std::string blocks;
  std::vector<float> values;
};

Expected Load(const std::string& name) {
  const std::string dir = "ops/testdata/ggml_blocks/";
  Expected e;
  e.blocks = ReadFileToString(dir + name + ".blocks").value();
  const std::string f32 = ReadFileToString(dir + name + ".f32").value();
  e.values.resize(f32.size() / sizeof(float));
  std::memcpy(e.values.data(), f32.data(), f32.size());
  return e;
}

class DecodeTest : public testing::TestWithParam<GgmlType> {};

TEST_P(DecodeTest, EveryValueIsLlamaCppsBitForBit) {
  const uint32_t type = static_cast<uint32_t>(GetParam());
  const GgmlTypeTraits* traits = GgmlTraitsOf(type);
  ASSERT_NE(traits, nullptr);
  const std::string name = traits->name;
  const Expected e = Load(name);
  ASSERT_EQ(e.values.size(), size_t{kRows * kCols});
  ASSERT_EQ(e.blocks.size(), size_t(GgmlRowBytes(*traits, kCols) * kRows));
  std::vector<float> row(kCols);
  int differing = 0;
  for (int r = 0; r < kRows; ++r) {
    const auto* blocks = reinterpret_cast<const uint8_t*>(e.blocks.data()) + r * GgmlRowBytes(*traits, kCols);
    ASSERT_TRUE(DecodeGgmlRow(type, blocks, kCols, row.data()).ok());
    for (int c = 0; c < kCols; ++c) {
      differing += std::memcmp(&row[c], &e.values[r * kCols + c], sizeof(float)) != 0;
      if (differing == 1 && std::memcmp(&row[c], &e.values[r * kCols + c], sizeof(float)) != 0) {
        ADD_FAILURE() << name << " row " << r << " value " << c << ": " << row[c] << " vs " << e.values[r * kCols + c];
      }
    }
  }
  EXPECT_EQ(differing, 0) << name;
}

INSTANTIATE_TEST_SUITE_P(LlamaGgufTypes, DecodeTest,
                         testing::Values(GgmlType::kQ4_0, GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ5_K,
                                         GgmlType::kQ6_K),
                         [](const testing::TestParamInfo<GgmlType>& info) {
                           return std::string(GgmlTraitsOf(static_cast<uint32_t>(info.param))->name);
                         });

TEST(DecodeGgmlRowTest, RefusesTypesItCannotDecodeByName) {
  float out[32];
  const uint8_t blocks[20] = {};
  const absl::Status s = DecodeGgmlRow(static_cast<uint32_t>(GgmlType::kQ4_1), blocks, 32, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("Q4_1"), std::string::npos) << s;
  EXPECT_NE(DecodeGgmlRow(99, blocks, 32, out).message().find("type 99"), std::string::npos);
}

TEST(DecodeGgmlRowTest, RefusesARowOfPartBlocks) {
  float out[64];
  const uint8_t blocks[64] = {};
  const absl::Status s = DecodeGgmlRow(static_cast<uint32_t>(GgmlType::kQ4_0), blocks, 40, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("40"), std::string::npos) << s;
}

TEST(GgmlTraitsTest, KnowsTheLayoutsOfTheFile) {
  EXPECT_EQ(GgmlTraitsOf(12)->block_bytes, 144);  // Q4_K
  EXPECT_EQ(GgmlTraitsOf(14)->block_elements, 256);
  EXPECT_EQ(GgmlTypeName(30), "BF16");
  EXPECT_EQ(GgmlTraitsOf(19), nullptr);  // An IQ type.
  EXPECT_EQ(GgmlTypeName(19), "type 19");
}

}  // namespace
}  // namespace llama
