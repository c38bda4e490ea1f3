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
    EXPECT_EQ(Q4KMixDType(*meta, 1), want) << *meta;
    ++checked;
  }
  EXPECT_EQ(checked, 8);  // output, q, k, v, o, gate, up, down.
}

TEST(Q4KMixTest, GivesTheTypesOfLlamaQuantizesTwentyTwoLayerFile) {
  const std::set<int> more_bits = {0, 1, 4, 7, 10, 13, 16, 19, 20, 21};
  EXPECT_EQ(Q4KMixDType("output.weight", 22), DType::kQ6_K);
  for (int layer = 0; layer < 22; ++layer) {
    const std::string prefix = "layers." + std::to_string(layer) + ".";
    const DType six_if_chosen = more_bits.count(layer) ? DType::kQ6_K : DType::kQ4_K;
    EXPECT_EQ(Q4KMixDType(prefix + "attention.wv.weight", 22), six_if_chosen) << layer;
    EXPECT_EQ(Q4KMixDType(prefix + "feed_forward.w2.weight", 22), six_if_chosen) << layer;
    for (const char* four : {"attention.wq.weight", "attention.wk.weight", "attention.wo.weight",
                             "feed_forward.w1.weight", "feed_forward.w3.weight"}) {
      EXPECT_EQ(Q4KMixDType(prefix + four, 22), DType::kQ4_K) << prefix << four;
    }
  }
}

}  // namespace
}  // namespace llama
