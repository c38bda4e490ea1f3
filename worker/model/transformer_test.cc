// The CPU model against our PyTorch transcription of the reference
// (tests/fixtures/reference_model.py) on the fixture checkpoints, converted to
// shards by //tools:convert's library; tolerances in golden_fixture.h. The
// generation goldens are tested through the engine in
// worker/batch/generation_golden_test.cc.

#include <cmath>
#include <memory>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "checkpoint/checkpoint_fixture.h"
#include "checkpoint/converter.h"
#include "worker/collectives/communicator.h"
#include "worker/model/golden_fixture.h"
#include "worker/model/model_weights.h"
#include "worker/model/planned_transformer.h"
#include "worker/model/rank_plan.h"
#include "worker/model/synthetic_weights.h"
#include "worker/model/transformer.h"

namespace llama {
namespace {

using ::llama::testing::Golden;
using ::llama::testing::kTolerance;
using ::llama::testing::MakeModel;
using ::llama::testing::ReadModelGolden;
using ::llama::testing::WorstLogitDifference;
using ::testing::HasSubstr;

class TransformerGoldenTest : public ::testing::TestWithParam<std::string> {};

// Every position's logits of a one-pass prefill, for prompts of 1 to 100 tokens.
TEST_P(TransformerGoldenTest, LogitsMatchPyTorch) {
  const double worst = WorstLogitDifference(GetParam(), ReadModelGolden(GetParam()));
  std::cout << GetParam() << ": largest logit difference " << worst << "\n";
}

// A 16-bit KV cache rounds each cached key and value once (relative error
// at most 2^-8 for bf16, 2^-11 for f16); the logits move by a small multiple
// of that times their scale, never by more than 1% of the largest logit for
// bf16 or 0.2% for f16 on these fixtures.
TEST_P(TransformerGoldenTest, HalfPrecisionKvCachesStayCloseToPyTorch) {
  const Golden golden = ReadModelGolden(GetParam());
  const auto& prompts = golden.json["prompts"];
  for (const auto& [dtype, relative_tolerance] : {std::pair{DType::kBF16, 1e-2}, std::pair{DType::kF16, 2e-3}}) {
    LocalCommunicator comm;
    TransformerOptions options;
    options.max_batch_size = 1;
    options.max_seq_len = 256;
    options.max_step_tokens = 128;
    options.kv_cache_dtype = dtype;
    std::unique_ptr<Transformer> model = MakeModel(GetParam(), &comm, options);
    double worst = 0, scale = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
      const std::vector<int> tokens = prompts[i].get<std::vector<int>>();
      absl::StatusOr<absl::Span<const float>> logits =
        model->Forward({{SlotBlockTables(*model, 1)[0], 0, tokens, true}});
      ASSERT_TRUE(logits.ok()) << logits.status();
      const float* expected = golden.logits.data() + golden.json["logit_offsets"][i].get<size_t>();
      for (size_t j = 0; j < logits->size(); ++j) {
        worst = std::max(worst, std::abs(double((*logits)[j]) - expected[j]));
        scale = std::max(scale, std::abs(double(expected[j])));
      }
    }
    std::cout << GetParam() << " " << DTypeName(dtype) << " KV cache: largest logit difference " << worst
              << " (largest logit " << scale << ")\n";
    EXPECT_LT(worst, relative_tolerance * scale) << DTypeName(dtype);
    EXPECT_GT(worst, 0.0) << DTypeName(dtype) << ": the cache was not rounded";
  }
}

INSTANTIATE_TEST_SUITE_P(Models, TransformerGoldenTest,
                         ::testing::Values("tiny_fp32_mp1", "tiny_fp16_mp1", "gqa_bf16_mp1", "llama3_bf16_mp1"));


TEST(TransformerTest, ShardOfAnotherWorldSizeIsRefused) {
  const std::string out = std::string(getenv("TEST_TMPDIR")) + "/tp2";
  ConvertOptions convert;
  convert.ckpt_dir = testing::CheckpointFixturePath("tiny_fp32_mp1");
  convert.out_dir = out;
  convert.world_size = 2;
  ASSERT_TRUE(ConvertCheckpoint(convert).ok());
  absl::StatusOr<std::unique_ptr<ShardReader>> shard = ShardReader::Open(out + "/" + ShardFileName(1, 2));
  ASSERT_TRUE(shard.ok());
  absl::StatusOr<ModelWeights> weights = LoadModelWeights(std::shared_ptr<const ShardReader>(std::move(*shard)));
  ASSERT_TRUE(weights.ok()) << weights.status();
  LocalCommunicator comm;
  absl::StatusOr<std::unique_ptr<Transformer>> model = PlanAndCreateTransformer(*std::move(weights), &comm, {});
  EXPECT_EQ(model.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(model.status().message(), HasSubstr("shard is for rank 1 of 2 but this process is rank 0 of 1"));
  EXPECT_THAT(model.status().message(), HasSubstr("--world_size=1"));
}

// A model small enough to build in a blink, for the error-path tests.
ModelConfig TinyConfig(int n_layers, int n_kv_heads) {
  return ModelShape(/*dim=*/32, n_layers, /*n_heads=*/4, n_kv_heads, /*vocab_size=*/40, /*multiple_of=*/16);
}

// A KV cache that cannot fit is a clear error, not a crash in the allocator.
TEST(TransformerTest, ImpossibleCacheSizeIsAClearError) {
  const ModelConfig config = TinyConfig(/*n_layers=*/2, /*n_kv_heads=*/4);
  LocalCommunicator comm;
  TransformerOptions options;
  options.max_batch_size = 1 << 20;
  options.max_seq_len = 1 << 20;
  absl::StatusOr<std::unique_ptr<Transformer>> model =
      PlanAndCreateTransformer(*SyntheticWeights(config, DType::kF32), &comm, options);
  EXPECT_EQ(model.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(model.status().message(), HasSubstr("lower --kv_cache_gb"));
}

// A plan is for one rank: a communicator of another world is refused.
TEST(TransformerTest, APlanOfAnotherRankIsRefused) {
  const ModelConfig config = TinyConfig(/*n_layers=*/1, /*n_kv_heads=*/4);
  ModelWeights weights = *SyntheticWeights(config, DType::kF32, 1, /*rank=*/0, /*world_size=*/2);
  const absl::StatusOr<RankPlan> plan = PlanRank(weights, 0, 2, TransformerOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status();
  LocalCommunicator comm;
  absl::StatusOr<std::unique_ptr<Transformer>> model = Transformer::Create(std::move(weights), &comm, *plan);
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(model.status().message(), HasSubstr("the plan is for rank 0 of 2 but the communicator is rank 0 of 1"));
}

TEST(TransformerTest, KvCacheOfANonFloatTypeIsAClearError) {
  const ModelConfig config = TinyConfig(/*n_layers=*/1, /*n_kv_heads=*/4);
  LocalCommunicator comm;
  TransformerOptions options;
  options.kv_cache_dtype = DType::kI8;
  absl::StatusOr<std::unique_ptr<Transformer>> model =
      PlanAndCreateTransformer(*SyntheticWeights(config, DType::kF32), &comm, options);
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(model.status().message(), HasSubstr("--kv_cache_dtype=i8: expected f32, bf16 or f16"));
}

// A NaN planted in layer 1's FFN output weight is reported with the layer,
// not passed on to sampling.
TEST(TransformerTest, NonFiniteActivationsNameTheLayer) {
  const ModelConfig config = TinyConfig(/*n_layers=*/3, /*n_kv_heads=*/2);
  ModelWeights weights = *SyntheticWeights(config, DType::kF32);
  weights.layers[1].w2.mutable_f32()[5] = NAN;
  LocalCommunicator comm;
  absl::StatusOr<std::unique_ptr<Transformer>> model = PlanAndCreateTransformer(std::move(weights), &comm, {});
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<int> tokens = {1, 7, 9};
  absl::StatusOr<absl::Span<const float>> logits =
      (*model)->Forward({{SlotBlockTables(**model, 1)[0], 0, tokens, false}});
  EXPECT_EQ(logits.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(logits.status().message(), HasSubstr("after layer 1 (rank 0)"));
}

}  // namespace
}  // namespace llama
