// LinearOptions::bf16_activations on q8_0, q4_k and q6_k weights at prefill:
// on AMX (linear_amx.h) the product of x and the decoded weights, each
// rounded to bf16, summed in f32; elsewhere the option is ignored and the
// f32 panels' result is kept bit for bit.

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <vector>

#include <gtest/gtest.h>

#include "ops/cast.h"
#include "ops/cpu/linear.h"
#include "ops/cpu/linear_amx.h"
#include "ops/cpu/thread_pool.h"
#include "ops/ggml_blocks.h"
#include "ops/quantize.h"
#include "ops/random_values.h"
#include "ops/tensor.h"

namespace llama::cpu {
namespace {

using ::llama::testing::Random;

struct BlockType {
  DType dtype;
  GgmlType ggml;
  absl::Status (*quantize)(const float* x, int64_t n, uint8_t* out);
};

class LinearAmxTest : public ::testing::TestWithParam<BlockType> {};

float Bf16(float v) { return Bf16ToF32(F32ToBf16(v)); }

// 33 rows (two full tiles and one of a row), 13 (one, partly empty) and
// 20 (two, the second partly empty); 40 outputs (a full panel and a part of
// one); 512 inputs (two super-blocks, 16 tile steps).
TEST_P(LinearAmxTest, PrefillIsTheBf16ProductOnAmxAndUnchangedElsewhere) {
  const int64_t out = 40, in = 512;
  const DType dtype = GetParam().dtype;
  std::vector<uint8_t> w(TensorBytes(dtype, out * in));
  ASSERT_TRUE(GetParam().quantize(Random(out * in, 5).data(), out * in, w.data()).ok());
  std::vector<float> decoded(out * in);
  ASSERT_TRUE(DecodeGgmlRow(static_cast<uint32_t>(GetParam().ggml), w.data(), out * in, decoded.data()).ok());
  ThreadPool pool(2);
  absl::StatusOr<Tensor> packed = PackLinearWeight(Tensor::View(dtype, {out, in}, w.data()), pool);
  ASSERT_TRUE(packed.ok()) << packed.status();
  LinearOptions bf16;
  bf16.bf16_activations = true;
  const bool amx = AmxBf16Usable();
  double worst = 0;
  // Larger n first, then smaller: the padded rows of x are zeroed anew.
  for (const int64_t n : {33, 13, 20}) {
    const std::vector<float> x = Random(n * in, 6 + n);
    std::vector<float> y(n * out), f32(n * out), without_tiles(n * out);
    ASSERT_TRUE(Linear(x.data(), n, *packed, f32.data(), pool).ok());
    // Without the tiles (no AMX, or forced off) the option changes nothing.
    ASSERT_TRUE(ForceAmxBf16ForTesting(false));
    ASSERT_TRUE(Linear(x.data(), n, *packed, without_tiles.data(), pool, bf16).ok());
    EXPECT_EQ(without_tiles, f32) << "n=" << n;
    if (!amx) continue;
    ASSERT_TRUE(ForceAmxBf16ForTesting(true));
    ASSERT_TRUE(Linear(x.data(), n, *packed, y.data(), pool, bf16).ok());
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t o = 0; o < out; ++o) {
        double sum = 0, size = 0;
        for (int64_t k = 0; k < in; ++k) {
          const double term = static_cast<double>(Bf16(x[r * in + k])) * Bf16(decoded[o * in + k]);
          sum += term;
          size += std::fabs(term);
        }
        // The products of bf16 values are exact in f32; the hardware's f32
        // sums (32 at a time into the tile, in its order) round: here at
        // most 0.3 epsilon of the terms' size was seen, 8 allowed.
        const double error = std::fabs(y[r * out + o] - sum);
        ASSERT_LE(error, 8 * FLT_EPSILON * size + 1e-30) << "n=" << n << " row " << r << " output " << o;
        worst = std::max(worst, error / size);
      }
    }
    // And not the f32 panels' result: x's rounding shows.
    EXPECT_NE(y, f32) << "n=" << n;
  }
  ASSERT_TRUE(ForceAmxBf16ForTesting(amx));
  if (amx) {
    std::printf("%s: AMX-BF16 tiles and the f32 panels ran; worst |error| / sum |terms| = %.2g\n",
                DTypeName(dtype).data(), worst);
  } else {
    std::printf("%s: AMX-BF16 not usable here (CPU or kernel); only the f32 panels ran\n", DTypeName(dtype).data());
  }
}

// With int8_activations on too (the job's default --int8_prefill), an
// explicit bf16_activations keeps the tiles where they run, and elsewhere
// the integer kernels take prefill as int8_activations alone would.
TEST_P(LinearAmxTest, Bf16ActivationsGoBeforeInt8ActivationsOnAmx) {
  const int64_t out = 40, in = 512, n = 20;
  const DType dtype = GetParam().dtype;
  std::vector<uint8_t> w(TensorBytes(dtype, out * in));
  ASSERT_TRUE(GetParam().quantize(Random(out * in, 7).data(), out * in, w.data()).ok());
  ThreadPool pool(2);
  absl::StatusOr<Tensor> packed = PackLinearWeight(Tensor::View(dtype, {out, in}, w.data()), pool);
  ASSERT_TRUE(packed.ok()) << packed.status();
  const std::vector<float> x = Random(n * in, 8);
  LinearOptions int8, bf16, both;
  int8.int8_activations = both.int8_activations = true;
  bf16.bf16_activations = both.bf16_activations = true;
  const bool amx = AmxBf16Usable();
  for (const bool tiles : {false, true}) {
    if (!ForceAmxBf16ForTesting(tiles)) continue;
    std::vector<float> y(n * out), expected(n * out);
    ASSERT_TRUE(Linear(x.data(), n, *packed, y.data(), pool, both).ok());
    ASSERT_TRUE(Linear(x.data(), n, *packed, expected.data(), pool, tiles ? bf16 : int8).ok());
    EXPECT_EQ(y, expected) << (tiles ? "AMX tiles" : "no tiles");
  }
  ASSERT_TRUE(ForceAmxBf16ForTesting(amx));
}

INSTANTIATE_TEST_SUITE_P(Types, LinearAmxTest,
                         ::testing::Values(BlockType{DType::kQ8_0, GgmlType::kQ8_0, QuantizeQ8_0},
                                           BlockType{DType::kQ4_K, GgmlType::kQ4_K, QuantizeQ4_K},
                                           BlockType{DType::kQ6_K, GgmlType::kQ6_K, QuantizeQ6_K}),
                         [](const ::testing::TestParamInfo<BlockType>& info) {
                           return std::string(DTypeName(info.param.dtype));
                         });

}  // namespace
}  // namespace llama::cpu
