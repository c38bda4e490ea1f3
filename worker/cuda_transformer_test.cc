// The GPU transformer against the CPU one on the same in-memory weights
// (no files, so the binary runs anywhere the GPU check script takes it).
// f32 weights: logits within 1e-3 (f32 GEMMs, another summation order) and
// identical greedy tokens. bf16 weights: the GPU feeds bf16 activations to
// the tensor cores where the CPU keeps f32, so logits agree within 5e-2 and
// greedy tokens must agree wherever the CPU's top two logits are 0.1 apart.

#include "worker/cuda_transformer.h"

#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "ops/cuda/cuda_status.h"
#include "worker/communicator.h"
#include "worker/generator.h"
#include "worker/synthetic_weights.h"
#include "worker/transformer.h"

namespace llama {
namespace {

ModelConfig SmallConfig() {
  ModelConfig c;
  c.dim = 256;
  c.n_layers = 4;
  c.n_heads = 8;
  c.n_kv_heads = 4;
  c.vocab_size = 512;
  c.multiple_of = 128;
  return c;
}

class CudaTransformerTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    std::string why_none;
    absl::StatusOr<int> devices = cuda::VisibleDeviceCount(&why_none);
    ASSERT_TRUE(devices.ok()) << devices.status();
    if (*devices == 0) GTEST_SKIP() << "no CUDA device visible: " << why_none;
  }
};

TEST_P(CudaTransformerTest, MatchesTheCpuModel) {
  const DType dtype = GetParam();
  const bool f32 = dtype == DType::kF32;
  TransformerOptions options;
  options.max_batch_size = 2;
  options.max_seq_len = 128;
  options.max_step_tokens = 64;
  LocalCommunicator comm;
  absl::StatusOr<std::unique_ptr<Transformer>> cpu = Transformer::Create(SyntheticWeights(SmallConfig(), dtype), &comm, options);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  absl::StatusOr<std::unique_ptr<CudaTransformer>> gpu = CudaTransformer::Create(SyntheticWeights(SmallConfig(), dtype), &comm, options);
  ASSERT_TRUE(gpu.ok()) << gpu.status();

  std::vector<int> prompt(37);
  for (int i = 0; i < 37; ++i) prompt[i] = (i * 131 + 7) % 512;
  absl::StatusOr<absl::Span<const float>> cpu_logits = (*cpu)->Forward({{0, 0, prompt, true}});
  ASSERT_TRUE(cpu_logits.ok());
  const std::vector<float> expected(cpu_logits->begin(), cpu_logits->end());
  absl::StatusOr<absl::Span<const float>> gpu_logits = (*gpu)->Forward({{0, 0, prompt, true}});
  ASSERT_TRUE(gpu_logits.ok()) << gpu_logits.status();
  ASSERT_EQ(gpu_logits->size(), expected.size());
  const double tolerance = f32 ? 1e-3 : 5e-2;
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_FALSE(std::isnan((*gpu_logits)[i])) << i;
    ASSERT_NEAR((*gpu_logits)[i], expected[i], tolerance) << "position " << i / 512 << " token " << i % 512;
  }

  SamplingOptions greedy;
  greedy.temperature = 0;
  greedy.max_gen_len = 32;
  Generator cpu_generator(cpu->get(), nullptr, 2), gpu_generator(gpu->get(), nullptr, 2);
  const std::vector<std::vector<int>> prompts = {prompt, {1, 5, 9}};
  absl::StatusOr<std::vector<Generation>> a = cpu_generator.Generate(prompts, greedy);
  absl::StatusOr<std::vector<Generation>> b = gpu_generator.Generate(prompts, greedy);
  ASSERT_TRUE(a.ok() && b.ok()) << b.status();
  if (f32) {
    for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ((*a)[i].tokens, (*b)[i].tokens) << i;
  } else {
    // The first token: compare where the CPU's decision is not a near-tie.
    const float* last = expected.data() + 36 * 512;
    std::vector<float> sorted(last, last + 512);
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
    if (sorted[0] - sorted[1] > 0.1f) {
      EXPECT_EQ((*a)[0].tokens[0], (*b)[0].tokens[0]);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaTransformerTest, ::testing::Values(DType::kF32, DType::kBF16));

}  // namespace
}  // namespace llama
