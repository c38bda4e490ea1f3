// Q4KMixDType against the types llama-quantize (llama.cpp c392e5094) wrote
// into Q4_K_M files: the committed one-layer file, read here tensor by
// tensor, and the 22-layer TinyLlama-shaped file of tools/compare_llama_cpp.sh
// (too large to commit: its layers with Q6_K value and down projections are
// listed below, as tools/inspect printed them).

#include "checkpoint/q4_k_mix.h"

#include <memory>
#include <optional>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "checkpoint/gguf_reader.h"
#include "checkpoint/llama_layout.h"
#include "ops/ggml_blocks.h"

namespace llama {
namespace {

ModelConfig Layers(int64_t n_layers, int64_t n_heads = 32, int64_t n_kv_heads = 4) {
  ModelConfig config;
  config.n_layers = n_layers;
  config.n_heads = n_heads;
  config.n_kv_heads = n_kv_heads;
  return config;
}

TEST(Q4KMixTest, GivesTheTypesOfLlamaQuantizesOneLayerFile) {
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open("checkpoint/testdata/gguf/Q4_K_M.gguf");
  ASSERT_TRUE(file.ok()) << file.status();
  int checked = 0;
  for (const GgufTensorInfo& info : (*file)->tensors()) {
    // Only the linear layers: llama.cpp also quantizes the embedding, which we keep as stored.
    if (info.shape.size() != 2 || info.name == "token_embd.weight") continue;
    const std::optional<std::string> meta = RenameTensor(info.name, TensorNaming::kGguf, TensorNaming::kMeta);
    ASSERT_TRUE(meta.has_value()) << info.name;
    const DType want = info.ggml_type == static_cast<uint32_t>(GgmlType::kQ6_K) ? DType::kQ6_K : DType::kQ4_K;
    EXPECT_EQ(Q4KMixDType(*meta, Layers(1)), want) << *meta;
    ++checked;
  }
  EXPECT_EQ(checked, 8);  // output, q, k, v, o, gate, up, down.
}

TEST(Q4KMixTest, GivesTheTypesOfLlamaQuantizesTwentyTwoLayerFile) {
  const std::set<int> more_bits = {0, 1, 4, 7, 10, 13, 16, 19, 20, 21};
  EXPECT_EQ(Q4KMixDType("output.weight", Layers(22)), DType::kQ6_K);
  for (int layer = 0; layer < 22; ++layer) {
    const std::string prefix = "layers." + std::to_string(layer) + ".";
    const DType six_if_chosen = more_bits.count(layer) ? DType::kQ6_K : DType::kQ4_K;
    EXPECT_EQ(Q4KMixDType(prefix + "attention.wv.weight", Layers(22)), six_if_chosen) << layer;
    EXPECT_EQ(Q4KMixDType(prefix + "feed_forward.w2.weight", Layers(22)), six_if_chosen) << layer;
    for (const char* four : {"attention.wq.weight", "attention.wk.weight", "attention.wo.weight",
                             "feed_forward.w1.weight", "feed_forward.w3.weight"}) {
      EXPECT_EQ(Q4KMixDType(prefix + four, Layers(22)), DType::kQ4_K) << prefix << four;
    }
  }
}

// llama.cpp's rule as llama_tensor_get_type states it (a 70B file is too
// large to make here): use_more_bits for the value and down projections,
// and in a 70B-class model Q5_K, which we write as Q6_K, for every other
// value projection; LLaMA 65B (80 layers, no grouped-query attention) is
// not 70B-class.
TEST(Q4KMixTest, GivesEightyLayerGroupedQueryModelsMoreBitsForEveryValueProjection) {
  const ModelConfig llama2_70b = Layers(80, 64, 8), llama1_65b = Layers(80, 64, 64);
  for (int layer = 0; layer < 80; ++layer) {
    const std::string prefix = "layers." + std::to_string(layer) + ".";
    const bool more_bits = layer < 10 || layer >= 70 || (layer - 10) % 3 == 2;
    const DType chosen = more_bits ? DType::kQ6_K : DType::kQ4_K;
    EXPECT_EQ(Q4KMixDType(prefix + "attention.wv.weight", llama2_70b), DType::kQ6_K) << layer;
    EXPECT_EQ(Q4KMixDType(prefix + "attention.wv.weight", llama1_65b), chosen) << layer;
    EXPECT_EQ(Q4KMixDType(prefix + "feed_forward.w2.weight", llama2_70b), chosen) << layer;
    EXPECT_EQ(Q4KMixDType(prefix + "attention.wq.weight", llama2_70b), DType::kQ4_K) << layer;
  }
}

}  // namespace
}  // namespace llama
