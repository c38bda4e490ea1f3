// QuantizeQ4_K and QuantizeQ6_K against llama.cpp's own quantizers on the
// values testdata/ggml_blocks/gen_blocks.c quantized (3 rows of 512 cubed
// pseudo-random values, every 97th scaled by 8, the third row offset so
// minimums matter): their squared error is at most llama.cpp's plus 10%
// (llama.cpp's make_qkx2_quants and make_qx_quants search more steps, with
// weights; ours an unweighted least-squares fit over 9 or 13), and
// DecodeGgmlRow reads back what was written.

#include "ops/quantize.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/durable_file.h"
#include "ops/dtype.h"
#include "ops/ggml_blocks.h"

namespace llama {
namespace {

constexpr int kRows = 3, kCols = 512;

// gen_blocks.c's values.
std::vector<float> GenBlocksValues() {
  std::vector<float> x(kRows * kCols);
  unsigned state = 12345;
  for (int i = 0; i < kRows * kCols; ++i) {
    state = state * 1664525u + 1013904223u;
    const float v = ((state >> 8) / 16777216.0f) * 2 - 1;
    x[i] = v * v * v * (i % 97 == 0 ? 8.0f : 1.0f) + (i / kCols == 2 ? 0.3f : 0.0f);
  }
  return x;
}

double SquaredError(const std::vector<float>& a, const std::vector<float>& b) {
  double e = 0;
  for (size_t i = 0; i < a.size(); ++i) e += (static_cast<double>(a[i]) - b[i]) * (a[i] - b[i]);
  return e;
}

// Our squared error on gen_blocks.c's values against that of llama.cpp's
// quantizer for the same type (its dequantized values in testdata).
void ExpectErrorWithinATenthOfLlamaCpps(GgmlType type, DType dtype,
                                        absl::Status (*quantize)(const float*, int64_t, uint8_t*)) {
  const std::vector<float> x = GenBlocksValues();
  const std::string name = std::string(GgmlTypeName(static_cast<uint32_t>(type)));
  const std::string f32 = ReadFileToString("ops/testdata/ggml_blocks/" + name + ".f32").value();
  std::vector<float> theirs(f32.size() / sizeof(float));
  ASSERT_EQ(theirs.size(), x.size());
  std::memcpy(theirs.data(), f32.data(), f32.size());
  std::vector<uint8_t> blocks(TensorBytes(dtype, x.size()));
  ASSERT_TRUE(quantize(x.data(), x.size(), blocks.data()).ok());
  std::vector<float> ours(x.size());
  ASSERT_TRUE(DecodeGgmlRow(static_cast<uint32_t>(type), blocks.data(), x.size(), ours.data()).ok());
  const double our_error = SquaredError(ours, x), their_error = SquaredError(theirs, x);
  std::printf("%s squared error over %zu values: ours %.6g, llama.cpp's %.6g (ratio %.3f)\n", name.c_str(), x.size(),
              our_error, their_error, our_error / their_error);
  EXPECT_LE(our_error, 1.1 * their_error);
}

TEST(QuantizeQ4KTest, ErrorIsWithinATenthOfLlamaCpps) {
  ExpectErrorWithinATenthOfLlamaCpps(GgmlType::kQ4_K, DType::kQ4_K, QuantizeQ4_K);
}

TEST(QuantizeQ6KTest, ErrorIsWithinATenthOfLlamaCpps) {
  ExpectErrorWithinATenthOfLlamaCpps(GgmlType::kQ6_K, DType::kQ6_K, QuantizeQ6_K);
}

// Zero, constant and two-valued sub-blocks (either sign the largest) come
// back within a step of the largest scale, zeros exactly.
TEST(QuantizeQ6KTest, SimpleSubBlocksComeBackWithinAStep) {
  std::vector<float> x(256, 0.0f);
  for (int i = 16; i < 32; ++i) x[i] = 0.5f;
  for (int i = 32; i < 48; ++i) x[i] = -0.25f;
  for (int i = 48; i < 64; ++i) x[i] = i % 2 ? 1.0f : -0.125f;
  for (int i = 64; i < 80; ++i) x[i] = i % 2 ? -1.0f : 0.125f;
  std::vector<uint8_t> block(kQ6KBlockBytes);
  ASSERT_TRUE(QuantizeQ6_K(x.data(), x.size(), block.data()).ok());
  std::vector<float> back(x.size());
  ASSERT_TRUE(DecodeGgmlRow(static_cast<uint32_t>(GgmlType::kQ6_K), block.data(), x.size(), back.data()).ok());
  for (int i = 0; i < 256; ++i) EXPECT_NEAR(back[i], x[i], 1.0f / 31) << i;  // A step of the largest scale.
  for (int i = 0; i < 16; ++i) EXPECT_EQ(back[i], 0.0f) << i;
  for (int i = 80; i < 256; ++i) EXPECT_EQ(back[i], 0.0f) << i;
}

TEST(QuantizeQ4KTest, ConstantAndZeroSubBlocksAreExactOrNear) {
  std::vector<float> x(256, 0.0f);
  for (int i = 32; i < 64; ++i) x[i] = 0.5f;    // Constant: the scale alone.
  for (int i = 64; i < 96; ++i) x[i] = -0.25f;  // Constant below zero: the minimum alone.
  std::vector<uint8_t> block(kQ4KBlockBytes);
  ASSERT_TRUE(QuantizeQ4_K(x.data(), x.size(), block.data()).ok());
  std::vector<float> back(x.size());
  ASSERT_TRUE(DecodeGgmlRow(static_cast<uint32_t>(GgmlType::kQ4_K), block.data(), x.size(), back.data()).ok());
  for (int i = 0; i < 256; ++i) EXPECT_NEAR(back[i], x[i], 0.5f / 63) << i;  // One 6-bit step of the largest scale.
}

TEST(QuantizeTest, NonFiniteValuesAreRefusedByIndex) {
  std::vector<float> x(512, 1.0f);
  x[300] = std::nanf("");
  for (const DType dtype : {DType::kQ4_K, DType::kQ6_K}) {
    std::vector<uint8_t> blocks(TensorBytes(dtype, x.size()));
    const absl::Status status = (dtype == DType::kQ4_K ? QuantizeQ4_K : QuantizeQ6_K)(x.data(), x.size(), blocks.data());
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << DTypeName(dtype);
    EXPECT_THAT(status.message(), ::testing::HasSubstr("element 300 is nan"));
  }
}

}  // namespace
}  // namespace llama
