// Loading a shard's tensors: int8 (q8_0) is accepted in the linear layers,
// where convert --dtype=int8 puts it, and refused elsewhere naming the
// tensor.

#include "worker/model/model_weights.h"

#include <algorithm>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/status_macros.h"
#include "checkpoint/llama_layout.h"
#include "checkpoint/shard_format.h"

namespace llama {
namespace {

using ::testing::HasSubstr;

// A one-rank shard of a tiny model, zeros, with `int8` tensors in q8_0
// and the rest in f32.
std::string WriteShard(const std::string& name, const std::vector<std::string>& int8) {
  const ModelConfig config =
      ModelShape(/*dim=*/64, /*n_layers=*/1, /*n_heads=*/2, /*n_kv_heads=*/2, /*vocab_size=*/32, /*multiple_of=*/32);
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/" + name;
  absl::StatusOr<std::unique_ptr<ShardWriter>> writer = ShardWriter::Create(path);
  EXPECT_TRUE(writer.ok()) << writer.status();
  for (const TensorSpec& spec : LlamaTensors(config)) {
    const DType dtype = std::count(int8.begin(), int8.end(), spec.name) ? DType::kQ8_0 : DType::kF32;
    shard::TensorSplit split;
    split.set_dim(-1);
    int64_t numel = 1;
    for (int64_t d : spec.shape) numel *= d;
    EXPECT_TRUE((*writer)->BeginTensor(spec.name, dtype, spec.shape, split).ok());
    EXPECT_TRUE((*writer)->Append(std::vector<uint8_t>(TensorBytes(dtype, numel), 0)).ok());
  }
  shard::ShardIndex index;
  *index.mutable_config() = ModelConfigToProto(config);
  index.set_world_size(1);
  index.set_rope_layout(shard::ROPE_LAYOUT_INTERLEAVED);
  EXPECT_TRUE((*writer)->Finish(index).ok());
  return path;
}

absl::StatusOr<ModelWeights> Load(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<ShardReader> shard, ShardReader::Open(path));
  return LoadModelWeights(std::shared_ptr<const ShardReader>(std::move(shard)));
}

TEST(ModelWeightsTest, Int8OnlyInTheLinearLayers) {
  absl::StatusOr<ModelWeights> linear = Load(WriteShard("linear.shard", {"layers.0.attention.wq.weight", "output.weight"}));
  ASSERT_TRUE(linear.ok()) << linear.status();
  EXPECT_EQ(linear->layers[0].wq.dtype(), DType::kQ8_0);
  EXPECT_EQ(linear->output.dtype(), DType::kQ8_0);
  EXPECT_EQ(linear->tok_embeddings.dtype(), DType::kF32);

  absl::StatusOr<ModelWeights> embedding = Load(WriteShard("embedding.shard", {"tok_embeddings.weight"}));
  ASSERT_FALSE(embedding.ok());
  EXPECT_THAT(embedding.status().message(),
              HasSubstr("tensor \"tok_embeddings.weight\" is q8_0; expected f32, f16 or bf16"));
}

}  // namespace
}  // namespace llama
