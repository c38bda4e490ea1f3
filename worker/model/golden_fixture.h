// The PyTorch goldens of the fixture checkpoints (tests/fixtures/engine_golden,
// from tests/fixtures/reference_model.py) and the CPU model built on each
// fixture's shard, for the model's tests and the generation tests above it.
//
// Tolerance 1e-4 absolute for logits and log-probabilities, for f32, f16 and
// bf16 weights alike: the model upcasts 16-bit weights to f32 exactly, as
// the reference script does, so both compute the same f32 function and
// differ only in summation order (observed differences are ~1e-6).

#ifndef LLAMA_WORKER_MODEL_GOLDEN_FIXTURE_H_
#define LLAMA_WORKER_MODEL_GOLDEN_FIXTURE_H_

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "checkpoint/checkpoint_fixture.h"
#include "checkpoint/converter.h"
#include "worker/collectives/communicator.h"
#include "worker/model/model_weights.h"
#include "worker/model/planned_transformer.h"
#include "worker/model/transformer.h"

namespace llama::testing {

constexpr double kTolerance = 1e-4;

struct Golden {
  nlohmann::json json;
  std::vector<float> logits;
};

inline Golden ReadModelGolden(const std::string& model) {
  Golden g;
  std::ifstream json("tests/fixtures/engine_golden/" + model + "/golden.json");
  EXPECT_TRUE(json) << "HINT: //tests/fixtures:engine_golden runs tests/fixtures/reference_model.py with /usr/bin/python3";
  g.json = nlohmann::json::parse(json);
  std::ifstream logits("tests/fixtures/engine_golden/" + model + "/logits.f32", std::ios::binary);
  logits.seekg(0, std::ios::end);
  g.logits.resize(logits.tellg() / sizeof(float));
  logits.seekg(0);
  logits.read(reinterpret_cast<char*>(g.logits.data()), g.logits.size() * sizeof(float));
  return g;
}

// Converts fixture `model` (MP=1) to shards for `world_size` ranks (in
// `dtype`, default as stored), once per test process (ranks on threads
// share them); returns their folder.
inline std::string ConvertFixture(const std::string& model, int world_size, std::optional<DType> dtype = std::nullopt) {
  static absl::Mutex mutex;
  static auto* done = new std::set<std::string>;
  const std::string out =
      absl::StrCat(getenv("TEST_TMPDIR"), "/", model, "/tp", world_size, dtype ? "_" : "", dtype ? DTypeName(*dtype) : "");
  absl::MutexLock lock(&mutex);
  if (!done->insert(out).second) return out;
  ConvertOptions convert;
  convert.ckpt_dir = CheckpointFixturePath(model);
  convert.out_dir = out;
  convert.world_size = world_size;
  convert.dtype = dtype;
  absl::StatusOr<ConvertResult> converted = ConvertCheckpoint(convert);
  EXPECT_TRUE(converted.ok()) << converted.status();
  return out;
}

// The CPU model of `comm`'s rank on fixture `model`'s shards.
inline std::unique_ptr<Transformer> MakeModel(const std::string& model, Communicator* comm, TransformerOptions options,
                                              std::optional<DType> dtype = std::nullopt) {
  const std::string out = ConvertFixture(model, comm->world_size(), dtype);
  absl::StatusOr<std::unique_ptr<ShardReader>> shard =
      ShardReader::Open(out + "/" + ShardFileName(comm->rank(), comm->world_size()));
  EXPECT_TRUE(shard.ok()) << shard.status();
  absl::StatusOr<ModelWeights> weights = LoadModelWeights(std::shared_ptr<const ShardReader>(std::move(*shard)));
  EXPECT_TRUE(weights.ok()) << weights.status();
  absl::StatusOr<std::unique_ptr<Transformer>> transformer = PlanAndCreateTransformer(*std::move(weights), comm, options);
  EXPECT_TRUE(transformer.ok()) << transformer.status();
  return *std::move(transformer);
}


// The largest |ours - PyTorch's| over every position's logits of a one-pass
// prefill of each golden prompt (1 to 100 tokens); fails the test past
// kTolerance, naming the place.
inline double WorstLogitDifference(const std::string& name, const Golden& golden) {
  LocalCommunicator comm;
  TransformerOptions options;
  options.max_batch_size = 1;
  options.max_seq_len = 256;
  options.max_step_tokens = 128;
  std::unique_ptr<Transformer> model = MakeModel(name, &comm, options);
  const int64_t vocab = golden.json["vocab_size"];
  EXPECT_EQ(model->limits().vocab_size, vocab);
  const auto& prompts = golden.json["prompts"];
  double worst = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::vector<int> tokens = prompts[i].get<std::vector<int>>();
    absl::StatusOr<absl::Span<const float>> logits =
        model->Forward({{SlotBlockTables(*model, 1)[0], 0, tokens, true}});
    EXPECT_TRUE(logits.ok()) << logits.status();
    if (!logits.ok() || logits->size() != tokens.size() * vocab) return 1e30;
    const float* expected = golden.logits.data() + golden.json["logit_offsets"][i].get<size_t>();
    for (size_t j = 0; j < logits->size(); ++j) {
      const double difference = std::abs(double((*logits)[j]) - expected[j]);
      if (difference > kTolerance) {
        ADD_FAILURE() << name << " prompt " << i << " position " << j / vocab << " token " << j % vocab << ": "
                      << (*logits)[j] << " vs " << expected[j];
        return difference;
      }
      worst = std::max(worst, difference);
    }
  }
  return worst;
}

}  // namespace llama::testing

#endif  // LLAMA_WORKER_MODEL_GOLDEN_FIXTURE_H_
