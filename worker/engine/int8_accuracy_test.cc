// int8 (q8_0) weights against the same model as stored (f32 or bf16), on
// the PyTorch fixtures: the largest logit difference relative to the
// largest logit, and the share of greedy tokens that agree over 256
// generated tokens. "Agree" is teacher-forced: the stored model's greedy
// continuation is fed to the int8 model one token at a time (the decode
// path, with its integer dot products), and at each step the int8 model's
// top token is compared with the stored model's; free-running greedy
// sequences of random-weight models part at the first near tie and say
// little after it. The same sequences also go through in one pass (the
// prefill path: f32 activations over widened weights, and with
// --int8_prefill int8 activations as at decode): every position's logits,
// and whether its top token is the stored model's. The bounds below are
// what the tests enforce; the measured values are printed.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint_fixture.h"
#include "checkpoint/converter.h"
#include "ops/cpu/linear.h"
#include "worker/dist/communicator.h"
#include "worker/engine/generator.h"
#include "worker/model/model_weights.h"
#include "worker/model/transformer.h"

namespace llama {
namespace {

// Enforced bounds (see the README's int8 section for the measured values).
// Measured: decode 0.055-0.076 and 94.6-95.6%; prefill with f32 activations
// 0.043-0.056 and 96.4-97.0%, with int8 activations 0.055-0.076 and
// 94.8-95.2%.
constexpr double kMaxRelativeLogitDifference = 0.10;
constexpr double kMinGreedyAgreement = 0.90;

std::unique_ptr<Transformer> Build(const std::string& model, std::optional<DType> dtype, Communicator* comm,
                                   bool int8_prefill = false) {
  ConvertOptions convert;
  convert.ckpt_dir = testing::CheckpointFixturePath(model);
  convert.out_dir = absl::StrCat(getenv("TEST_TMPDIR"), "/", model, dtype ? "_int8" : "_stored", int8_prefill ? "_ip" : "");
  convert.dtype = dtype;
  absl::StatusOr<ConvertResult> converted = ConvertCheckpoint(convert);
  EXPECT_TRUE(converted.ok()) << converted.status();
  absl::StatusOr<std::unique_ptr<ShardReader>> shard = ShardReader::Open(convert.out_dir + "/" + ShardFileName(0, 1));
  EXPECT_TRUE(shard.ok()) << shard.status();
  absl::StatusOr<ModelWeights> weights = LoadModelWeights(std::shared_ptr<const ShardReader>(std::move(*shard)));
  EXPECT_TRUE(weights.ok()) << weights.status();
  TransformerOptions options;
  options.max_batch_size = 1;
  options.max_seq_len = 512;
  options.int8_prefill = int8_prefill;
  absl::StatusOr<std::unique_ptr<Transformer>> transformer = Transformer::Create(*std::move(weights), comm, options);
  EXPECT_TRUE(transformer.ok()) << transformer.status();
  return *std::move(transformer);
}

int Argmax(absl::Span<const float> logits) {
  return static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

class Int8AccuracyTest : public ::testing::TestWithParam<std::string> {};

TEST_P(Int8AccuracyTest, CloseToTheStoredWeights) {
  const std::string model = GetParam();
  std::ifstream golden_file("tests/fixtures/engine_golden/" + model + "/golden.json");
  const nlohmann::json golden = nlohmann::json::parse(golden_file);
  LocalCommunicator comm;
  std::unique_ptr<Transformer> stored = Build(model, std::nullopt, &comm);
  std::unique_ptr<Transformer> int8 = Build(model, DType::kQ8_0, &comm);
  std::unique_ptr<Transformer> int8_prefill = Build(model, DType::kQ8_0, &comm, /*int8_prefill=*/true);
  const int64_t vocab = stored->vocab_size();
  double worst_relative = 0;
  int agree = 0, steps = 0, prefill_positions = 0;
  // [0]: f32 activations at prefill (the default); [1]: --int8_prefill.
  double worst_prefill_relative[2] = {0, 0};
  int prefill_agree[2] = {0, 0};
  for (const auto& p : golden["prompts"]) {
    const std::vector<int> prompt = p.get<std::vector<int>>();
    // The stored model's greedy continuation.
    Generator generator(stored.get(), nullptr, /*stop_ids=*/{});
    SamplingOptions sampling;
    sampling.temperature = 0;
    sampling.max_gen_len = 256;
    absl::StatusOr<std::vector<Generation>> continuation = generator.Generate({prompt}, sampling);
    ASSERT_TRUE(continuation.ok()) << continuation.status();
    std::vector<int> sequence = prompt;
    sequence.insert(sequence.end(), (*continuation)[0].tokens.begin(), (*continuation)[0].tokens.end());
    const std::vector<int32_t> table = SlotBlockTables(*stored, 1)[0];
    // Both models over the whole sequence in one pass (the prefill path):
    // every position's logits.
    absl::StatusOr<absl::Span<const float>> all = stored->Forward({{table, 0, sequence, true}});
    ASSERT_TRUE(all.ok()) << all.status();
    const std::vector<float> reference_all(all->begin(), all->end());
    prefill_positions += sequence.size();
    for (int way = 0; way < 2; ++way) {
      all = (way == 0 ? int8 : int8_prefill)->Forward({{table, 0, sequence, true}});
      ASSERT_TRUE(all.ok()) << all.status();
      ASSERT_EQ(all->size(), reference_all.size());
      for (size_t i = 0; i < sequence.size(); ++i) {
        const absl::Span<const float> a(reference_all.data() + i * vocab, vocab), b = all->subspan(i * vocab, vocab);
        double largest = 0, difference = 0;
        for (int64_t v = 0; v < vocab; ++v) {
          largest = std::max(largest, std::abs(double(a[v])));
          difference = std::max(difference, std::abs(double(b[v]) - a[v]));
        }
        worst_prefill_relative[way] = std::max(worst_prefill_relative[way], difference / largest);
        prefill_agree[way] += Argmax(b) == Argmax(a);
      }
    }
    // Both models one token at a time (the decode path).
    for (size_t i = 0; i + 1 < sequence.size(); ++i) {
      const std::vector<int> token = {sequence[i]};
      absl::StatusOr<absl::Span<const float>> a = stored->Forward({{table, static_cast<int64_t>(i), token, false}});
      ASSERT_TRUE(a.ok()) << a.status();
      const std::vector<float> reference(a->begin(), a->end());
      absl::StatusOr<absl::Span<const float>> b = int8->Forward({{table, static_cast<int64_t>(i), token, false}});
      ASSERT_TRUE(b.ok()) << b.status();
      ASSERT_EQ(b->size(), static_cast<size_t>(vocab));
      double largest = 0, difference = 0;
      for (int64_t v = 0; v < vocab; ++v) {
        largest = std::max(largest, std::abs(double(reference[v])));
        difference = std::max(difference, std::abs(double((*b)[v]) - reference[v]));
      }
      worst_relative = std::max(worst_relative, difference / largest);
      if (i + 1 >= prompt.size()) {
        ++steps;
        agree += Argmax(*b) == sequence[i + 1];
      }
    }
  }
  const double agreement = static_cast<double>(agree) / steps;
  std::printf("%s int8 (%s kernel) vs stored weights: largest logit difference %.4f of the largest logit; greedy "
              "tokens agree at %d of %d steps (%.1f%%)\n",
              model.c_str(), std::string(cpu::Int8Kernel()).c_str(), worst_relative, agree, steps, 100 * agreement);
  EXPECT_LT(worst_relative, kMaxRelativeLogitDifference);
  EXPECT_GE(agreement, kMinGreedyAgreement);
  for (int way = 0; way < 2; ++way) {
    const double prefill_agreement = static_cast<double>(prefill_agree[way]) / prefill_positions;
    std::printf("  one-pass prefill of the same sequences, %s: largest logit difference %.4f; top tokens agree at "
                "%d of %d positions (%.1f%%)\n",
                way == 0 ? "f32 activations" : "int8 activations (--int8_prefill)", worst_prefill_relative[way],
                prefill_agree[way], prefill_positions, 100 * prefill_agreement);
    EXPECT_LT(worst_prefill_relative[way], kMaxRelativeLogitDifference);
    EXPECT_GE(prefill_agreement, kMinGreedyAgreement);
  }
  EXPECT_GE(steps, 4 * 256);
}

INSTANTIATE_TEST_SUITE_P(Models, Int8AccuracyTest,
                         ::testing::Values("tiny_fp32_mp1", "gqa_bf16_mp1", "llama3_bf16_mp1"));

}  // namespace
}  // namespace llama
