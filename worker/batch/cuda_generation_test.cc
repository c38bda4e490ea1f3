// The GPU transformer against the CPU one on the same in-memory weights,
// logits and generations through the engine
// (no files, so the binary runs anywhere the GPU check script takes it).
// f32 weights: logits within 1e-3 (f32 GEMMs, another summation order) and
// identical greedy and sampled tokens. bf16 weights: the GPU feeds bf16
// activations to the tensor cores where the CPU keeps f32, so logits agree
// within 5e-2 and greedy tokens must agree wherever the CPU's top two
// logits are 0.1 apart. 16-bit KV caches: both backends round the same f32
// keys and values, which differ in the last bits, so a rare element rounds
// the other way: 5e-3.

#include "worker/model/cuda_transformer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <tuple>

#include <gtest/gtest.h>

#include "base/status_macros.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/gpu_test.h"
#include "worker/batch/generator.h"
#include "worker/collectives/communicator.h"
#include "worker/collectives/nccl_communicator.h"
#include "worker/collectives/one_rank_nccl.h"
#include "worker/collectives/rendezvous.h"
#include "worker/model/planned_transformer.h"
#include "worker/model/rank_plan.h"
#include "worker/model/synthetic_weights.h"
#include "worker/model/transformer.h"

namespace llama {
namespace {

ModelConfig SmallConfig() {
  return ModelShape(/*dim=*/256, /*n_layers=*/4, /*n_heads=*/8, /*n_kv_heads=*/4, /*vocab_size=*/512,
                    /*multiple_of=*/128);
}

TransformerOptions SmallOptions(DType kv_cache_dtype = DType::kF32, bool cuda_graphs = true) {
  TransformerOptions options;
  options.max_batch_size = 2;
  options.max_seq_len = 128;
  options.max_step_tokens = 64;
  options.kv_cache_dtype = kv_cache_dtype;
  options.cuda_graphs = cuda_graphs;
  return options;
}

// PlanRank for the communicator's rank, then the GPU model of that plan.
absl::StatusOr<std::unique_ptr<CudaTransformer>> PlanAndCreateCudaTransformer(const ModelWeights& weights,
                                                                             NcclCommunicator* nccl,
                                                                             const TransformerOptions& options) {
  ASSIGN_OR_RETURN(const RankPlan plan, PlanRank(weights, nccl != nullptr ? nccl->rank() : 0,
                                                 nccl != nullptr ? nccl->world_size() : 1, options));
  return CudaTransformer::Create(weights, nccl, plan);
}

std::vector<int> Prompt() {
  std::vector<int> prompt(37);
  for (int i = 0; i < 37; ++i) prompt[i] = (i * 131 + 7) % 512;
  return prompt;
}

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LLAMA_SKIP_WITHOUT_GPU();
  }
};

// (weights, KV cache) dtypes.
class CudaTransformerTest : public CudaTest, public ::testing::WithParamInterface<std::tuple<DType, DType>> {};

TEST_P(CudaTransformerTest, MatchesTheCpuModel) {
  const auto [dtype, cache_dtype] = GetParam();
  const bool f32 = dtype == DType::kF32;
  const TransformerOptions options = SmallOptions(cache_dtype);
  LocalCommunicator comm;
  absl::StatusOr<std::unique_ptr<Transformer>> cpu = PlanAndCreateTransformer(*SyntheticWeights(SmallConfig(), dtype), &comm, options);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  absl::StatusOr<std::unique_ptr<CudaTransformer>> gpu =
      PlanAndCreateCudaTransformer(*SyntheticWeights(SmallConfig(), dtype), nullptr, options);
  ASSERT_TRUE(gpu.ok()) << gpu.status();

  const std::vector<int> prompt = Prompt();
  const std::vector<int32_t> table = SlotBlockTables(**cpu, 1)[0];
  absl::StatusOr<absl::Span<const float>> cpu_logits = (*cpu)->Forward({{table, 0, prompt, true}});
  ASSERT_TRUE(cpu_logits.ok());
  const std::vector<float> expected(cpu_logits->begin(), cpu_logits->end());
  absl::StatusOr<absl::Span<const float>> gpu_logits = (*gpu)->Forward({{table, 0, prompt, true}});
  ASSERT_TRUE(gpu_logits.ok()) << gpu_logits.status();
  ASSERT_EQ(gpu_logits->size(), expected.size());
  const double tolerance = !f32 ? 5e-2 : cache_dtype != DType::kF32 ? 5e-3 : 1e-3;
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_FALSE(std::isnan((*gpu_logits)[i])) << i;
    ASSERT_NEAR((*gpu_logits)[i], expected[i], tolerance) << "position " << i / 512 << " token " << i % 512;
  }

  SamplingOptions greedy;
  greedy.sampling.token.temperature = 0;
  greedy.max_gen_len = 32;
  greedy.logprobs = true;
  Generator cpu_generator(cpu->get(), nullptr, {2}), gpu_generator(gpu->get(), nullptr, {2});
  const std::vector<std::vector<int>> prompts = {prompt, {1, 5, 9}};
  absl::StatusOr<std::vector<Generation>> a = cpu_generator.Generate(prompts, greedy);
  absl::StatusOr<std::vector<Generation>> b = gpu_generator.Generate(prompts, greedy);
  ASSERT_TRUE(a.ok() && b.ok()) << b.status();
  if (f32 && cache_dtype == DType::kF32) {
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ((*a)[i].tokens, (*b)[i].tokens) << i;
      for (size_t j = 0; j < (*a)[i].logprobs.size() && j < (*b)[i].logprobs.size(); ++j) {
        EXPECT_NEAR((*a)[i].logprobs[j], (*b)[i].logprobs[j], 1e-3) << i << " " << j;
      }
    }
    // Sampling on the device picks the CPU sampler's tokens for the same draws.
    SamplingOptions sampled = greedy;
    sampled.sampling.token.temperature = 0.8f;
    sampled.sampling.token.top_p = 0.9f;
    a = cpu_generator.Generate(prompts, sampled);
    b = gpu_generator.Generate(prompts, sampled);
    ASSERT_TRUE(a.ok() && b.ok()) << b.status();
    for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ((*a)[i].tokens, (*b)[i].tokens) << "sampled " << i;
  } else {
    // The first token: compare where the CPU's decision is not a near-tie.
    const float* last = expected.data() + 36 * 512;
    std::vector<float> sorted(last, last + 512);
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
    if (sorted[0] - sorted[1] > 0.1f) {
      EXPECT_EQ((*a)[0].tokens[0], (*b)[0].tokens[0]);
    }
  }
  EXPECT_GT((*gpu)->graphs_captured(), 0) << "decode steps never replayed a CUDA graph";
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaTransformerTest,
                         ::testing::Values(std::make_tuple(DType::kF32, DType::kF32),
                                           std::make_tuple(DType::kBF16, DType::kF32),
                                           std::make_tuple(DType::kF32, DType::kBF16),
                                           std::make_tuple(DType::kF32, DType::kF16)));

// Both models generate the same tokens and log-probabilities, bit for bit.
void ExpectSameGenerations(LanguageModel* a, LanguageModel* b, const std::vector<std::vector<int>>& prompts,
                           const SamplingOptions& options) {
  Generator first(a, nullptr, {2}), second(b, nullptr, {2});
  absl::StatusOr<std::vector<Generation>> x = first.Generate(prompts, options);
  absl::StatusOr<std::vector<Generation>> y = second.Generate(prompts, options);
  ASSERT_TRUE(x.ok() && y.ok()) << x.status() << y.status();
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ((*x)[i].tokens, (*y)[i].tokens) << "prompt " << i;
    EXPECT_EQ((*x)[i].logprobs, (*y)[i].logprobs) << "prompt " << i;
  }
}

// Graph replay runs the very kernels of an eager step: the same tokens and
// log-probabilities, bit for bit, over batches whose rows finish at
// different steps (so several row counts get graphs).
TEST_F(CudaTest, GraphReplayEqualsEagerSteps) {
  absl::StatusOr<std::unique_ptr<CudaTransformer>> with_graphs =
      PlanAndCreateCudaTransformer(*SyntheticWeights(SmallConfig(), DType::kBF16), nullptr, SmallOptions(DType::kBF16, true));
  absl::StatusOr<std::unique_ptr<CudaTransformer>> eager = PlanAndCreateCudaTransformer(
      *SyntheticWeights(SmallConfig(), DType::kBF16), nullptr, SmallOptions(DType::kBF16, false));
  ASSERT_TRUE(with_graphs.ok() && eager.ok()) << with_graphs.status() << eager.status();
  SamplingOptions o;
  o.sampling.token.temperature = 0.9f;
  o.sampling.token.top_p = 0.95f;
  o.logprobs = true;
  const std::vector<std::vector<int>> prompts = {Prompt(), {1, 5, 9}, {7}};
  for (int64_t max_gen_len : {40, 7, 80}) {
    o.max_gen_len = max_gen_len;
    ExpectSameGenerations(with_graphs->get(), eager->get(), prompts, o);
  }
  EXPECT_GE((*with_graphs)->graphs_captured(), 2);
  EXPECT_EQ((*eager)->graphs_captured(), 0);
}

// The model over NCCL on one rank (the worker uses none for a world of one):
// the all-reduces go on the model's stream, inside the captured graphs, and
// the step waits through the communicator; the tokens are those of the
// model without NCCL, bit for bit.
TEST_F(CudaTest, NcclOnOneRankChangesNothing) {
  absl::StatusOr<OneRankNccl> nccl = JoinOneRankNccl();
  ASSERT_TRUE(nccl.ok()) << nccl.status();
  absl::StatusOr<std::unique_ptr<CudaTransformer>> with_nccl =
      PlanAndCreateCudaTransformer(*SyntheticWeights(SmallConfig(), DType::kBF16), nccl->communicator.get(), SmallOptions());
  absl::StatusOr<std::unique_ptr<CudaTransformer>> without =
      PlanAndCreateCudaTransformer(*SyntheticWeights(SmallConfig(), DType::kBF16), nullptr, SmallOptions());
  ASSERT_TRUE(with_nccl.ok() && without.ok()) << with_nccl.status() << without.status();
  SamplingOptions o;
  o.sampling.token.temperature = 0.7f;
  o.max_gen_len = 24;
  o.logprobs = true;
  ExpectSameGenerations(with_nccl->get(), without->get(), {Prompt(), {1, 5, 9}}, o);
  EXPECT_GT((*with_nccl)->graphs_captured(), 0) << "no decode graph was captured with NCCL calls in it";
}

// Logit adjustments (logit_bias, penalties), token masks and the top_k /
// min_p filters go through the host's copy of the logits: the biased token is chosen, and
// its log-probability is the model's, from the same logits Forward returns.
TEST_F(CudaTest, HostSideChoicesMoveTheChoiceNotTheLogprob) {
  absl::StatusOr<std::unique_ptr<CudaTransformer>> gpu =
      PlanAndCreateCudaTransformer(*SyntheticWeights(SmallConfig(), DType::kBF16), nullptr, SmallOptions());
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  const std::vector<int> prompt = Prompt();
  const std::vector<int32_t> table = SlotBlockTables(**gpu, 1)[0];
  absl::StatusOr<absl::Span<const float>> logits = (*gpu)->Forward({{table, 0, prompt, false}});
  ASSERT_TRUE(logits.ok()) << logits.status();
  const std::vector<float> row(logits->begin(), logits->end());
  const int unbiased = static_cast<int>(std::max_element(row.begin(), row.end()) - row.begin());
  const int forced = unbiased == 77 ? 78 : 77;
  const LogitAdjustment bias[] = {{forced, 1000.0f}};
  TokenChoice choice;
  choice.adjustments = bias;
  ChosenToken chosen;
  ASSERT_TRUE((*gpu)->ForwardAndChoose({{table, 0, prompt, false}}, {choice}, absl::MakeSpan(&chosen, 1)).ok());
  EXPECT_EQ(chosen.token, forced);
  EXPECT_FLOAT_EQ(chosen.logprob, LogProb(row.data(), static_cast<int64_t>(row.size()), forced));
  // top_k 1 (a host-side filter) at temperature 1 leaves the argmax.
  TokenChoice top_one;
  top_one.sampling.temperature = 1.0f;
  top_one.sampling.top_k = 1;
  top_one.uniform = 0.99;
  ASSERT_TRUE((*gpu)->ForwardAndChoose({{table, 0, prompt, false}}, {top_one}, absl::MakeSpan(&chosen, 1)).ok());
  EXPECT_EQ(chosen.token, unbiased);
  // A token mask (structured output) that leaves the argmax out: the best
  // allowed token, greedy and sampled, with the model's log-probability.
  std::vector<uint64_t> mask((row.size() + 63) / 64, 0);
  for (int t : {forced, 3, 200}) mask[t / 64] |= uint64_t{1} << (t % 64);
  int best_allowed = 3;
  for (int t : {forced, 200}) best_allowed = row[t] > row[best_allowed] ? t : best_allowed;
  TokenChoice masked;
  masked.allowed = mask.data();
  ASSERT_TRUE((*gpu)->ForwardAndChoose({{table, 0, prompt, false}}, {masked}, absl::MakeSpan(&chosen, 1)).ok());
  EXPECT_EQ(chosen.token, best_allowed);
  EXPECT_FLOAT_EQ(chosen.logprob, LogProb(row.data(), static_cast<int64_t>(row.size()), best_allowed));
  masked.sampling.temperature = 1.0f;
  for (const double uniform : {0.01, 0.5, 0.99}) {
    masked.uniform = uniform;
    ASSERT_TRUE((*gpu)->ForwardAndChoose({{table, 0, prompt, false}}, {masked}, absl::MakeSpan(&chosen, 1)).ok());
    EXPECT_TRUE(chosen.token == forced || chosen.token == 3 || chosen.token == 200) << chosen.token;
  }
}

// Speculative decoding's verification on the device: a chunk whose last
// three tokens are guesses gets a pick at each of its last four rows, each
// the argmax of that row's logits as Forward returns them, with its
// log-probability (device sampling, several rows per chunk).
TEST_F(CudaTest, VerificationRowsArePickedOnTheDevice) {
  absl::StatusOr<std::unique_ptr<CudaTransformer>> gpu =
      PlanAndCreateCudaTransformer(*SyntheticWeights(SmallConfig(), DType::kBF16), nullptr, SmallOptions());
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  const std::vector<int> prompt = Prompt();
  ASSERT_GE(prompt.size(), 4u);
  const std::vector<int32_t> table = SlotBlockTables(**gpu, 1)[0];
  SequenceChunk chunk{table, 0, prompt, false};
  chunk.proposed = 3;
  absl::StatusOr<absl::Span<const float>> logits = (*gpu)->Forward({chunk});
  ASSERT_TRUE(logits.ok()) << logits.status();
  const int64_t vocab = (*gpu)->limits().vocab_size;
  ASSERT_EQ(static_cast<int64_t>(logits->size()), 4 * vocab);
  const std::vector<float> rows(logits->begin(), logits->end());
  std::vector<TokenChoice> choices(4);
  std::vector<ChosenToken> chosen(4);
  ASSERT_TRUE((*gpu)->ForwardAndChoose({chunk}, choices, absl::MakeSpan(chosen)).ok());
  for (int r = 0; r < 4; ++r) {
    const float* row = rows.data() + r * vocab;
    EXPECT_EQ(chosen[r].token, Argmax(row, vocab)) << "row " << r;
    EXPECT_NEAR(chosen[r].logprob, LogProb(row, vocab, chosen[r].token), 1e-5) << "row " << r;
  }
}

// Checked before the GPU is touched, so these run on any machine.
TEST(CudaTransformerArgumentsTest, BadOptionsAreClearErrors) {
  TransformerOptions options = SmallOptions(DType::kI8);
  absl::StatusOr<std::unique_ptr<CudaTransformer>> gpu =
      PlanAndCreateCudaTransformer(*SyntheticWeights(SmallConfig(), DType::kBF16), nullptr, options);
  EXPECT_EQ(gpu.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(gpu.status().message().find("--kv_cache_dtype=i8: expected f32, bf16 or f16"), std::string::npos)
      << gpu.status();
  options = SmallOptions();
  options.max_batch_size = 0;
  gpu = PlanAndCreateCudaTransformer(*SyntheticWeights(SmallConfig(), DType::kBF16), nullptr, options);
  EXPECT_NE(gpu.status().message().find("--max_batch_size (0)"), std::string::npos) << gpu.status();
  gpu = PlanAndCreateCudaTransformer(*SyntheticWeights(SmallConfig(), DType::kBF16, 1, 0, 2), nullptr, SmallOptions());
  EXPECT_NE(gpu.status().message().find("the shard is for rank 0 of 2 but this process is rank 0 of 1"),
            std::string::npos)
      << gpu.status();
}

TEST_F(CudaTest, TooBigACacheIsAClearError) {
  TransformerOptions options = SmallOptions();
  options.max_batch_size = 1 << 20;
  options.max_seq_len = 1 << 16;
  absl::StatusOr<std::unique_ptr<CudaTransformer>> gpu =
      PlanAndCreateCudaTransformer(*SyntheticWeights(SmallConfig(), DType::kBF16), nullptr, options);
  ASSERT_FALSE(gpu.ok());
  EXPECT_NE(gpu.status().message().find("lower --kv_cache_gb"), std::string::npos)
      << gpu.status();
}

TEST_F(CudaTest, Int8WeightsAreRefusedUntilSupported) {
  absl::StatusOr<std::unique_ptr<CudaTransformer>> gpu =
      PlanAndCreateCudaTransformer(*SyntheticWeights(SmallConfig(), DType::kQ8_0), nullptr, SmallOptions());
  ASSERT_FALSE(gpu.ok());
  EXPECT_EQ(gpu.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(gpu.status().message().find("int8 (q8_0) shards run on CPUs only"), std::string::npos) << gpu.status();
}

}  // namespace
}  // namespace llama
