#include "worker/model/step_graphs.h"

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace llama {
namespace {

const std::vector<int32_t> kTable = {0};

std::vector<SequenceChunk> Step(const std::vector<int>& tokens, int tokens_per_chunk, bool all_logits = false) {
  std::vector<SequenceChunk> chunks;
  for (size_t i = 0; i + tokens_per_chunk <= tokens.size(); i += tokens_per_chunk) {
    chunks.push_back({kTable, 10,
                      absl::MakeConstSpan(tokens).subspan(i, tokens_per_chunk), all_logits});
  }
  return chunks;
}

TEST(StepGraphsTest, OnlyDecodeStepsHaveKeys) {
  StepGraphs<int> graphs(4, true);
  const std::vector<int> tokens = {1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_EQ(graphs.KeyOf(Step({1, 2, 3}, 1)), 3);
  EXPECT_EQ(graphs.KeyOf(Step({1, 2, 3, 4}, 1)), 4);
  EXPECT_EQ(graphs.KeyOf(Step(tokens, 1)), std::nullopt);  // More rows than planned.
  EXPECT_EQ(graphs.KeyOf(Step({1, 2, 3, 4}, 2)), std::nullopt);  // Prefill.
  EXPECT_EQ(graphs.KeyOf(Step({1, 2}, 1, /*all_logits=*/true)), std::nullopt);
  EXPECT_EQ(graphs.KeyOf({}), std::nullopt);
  std::vector<SequenceChunk> mixed = Step({1, 2, 3}, 1);
  const std::vector<int> prompt = {4, 5, 6};
  mixed.push_back({kTable, 0, prompt, false});
  EXPECT_EQ(graphs.KeyOf(mixed), std::nullopt);  // One row still prefilling.
}

TEST(StepGraphsTest, EagerFirstThenCaptureThenReplay) {
  StepGraphs<std::string> graphs(4, true);
  EXPECT_EQ(graphs.Plan(2), StepMode::kEager);
  EXPECT_EQ(graphs.Plan(3), StepMode::kEager);
  EXPECT_EQ(graphs.Plan(2), StepMode::kCapture);
  graphs.Captured(2, "graph for 2 rows");
  EXPECT_EQ(graphs.Plan(2), StepMode::kReplay);
  EXPECT_EQ(graphs.graph(2), "graph for 2 rows");
  EXPECT_EQ(graphs.Plan(3), StepMode::kCapture);
  EXPECT_EQ(graphs.Plan(std::nullopt), StepMode::kEager);
  EXPECT_EQ(graphs.captures(), 1);
  EXPECT_TRUE(graphs.enabled());
}

TEST(StepGraphsTest, AFailedCaptureTurnsGraphsOffAndReleasesThem) {
  StepGraphs<std::shared_ptr<int>> graphs(4, true);
  auto graph = std::make_shared<int>(1);
  graphs.Plan(1);
  ASSERT_EQ(graphs.Plan(1), StepMode::kCapture);
  graphs.Captured(1, graph);
  EXPECT_EQ(graph.use_count(), 2);
  graphs.Plan(2);
  ASSERT_EQ(graphs.Plan(2), StepMode::kCapture);
  EXPECT_TRUE(graphs.CaptureFailed(absl::InternalError("operation not permitted when stream is capturing"), 1).ok());
  EXPECT_EQ(graph.use_count(), 1);  // Released.
  EXPECT_FALSE(graphs.enabled());
  EXPECT_EQ(graphs.disabled_reason().message(), "operation not permitted when stream is capturing");
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(graphs.Plan(1), StepMode::kEager);
    EXPECT_EQ(graphs.Plan(2), StepMode::kEager);
  }
}

// With peers a rank cannot fall back alone: the step fails, naming the way
// out, and graphs stay off.
TEST(StepGraphsTest, AFailedCaptureWithPeersFailsTheStep) {
  StepGraphs<int> graphs(4, true);
  graphs.Plan(1);
  ASSERT_EQ(graphs.Plan(1), StepMode::kCapture);
  const absl::Status step = graphs.CaptureFailed(absl::InternalError("capture invalidated"), 2);
  EXPECT_EQ(step.code(), absl::StatusCode::kInternal);
  EXPECT_NE(step.message().find("2 ranks"), std::string::npos) << step;
  EXPECT_NE(step.message().find("--cuda_graphs=false"), std::string::npos) << step;
  EXPECT_NE(step.message().find("capture invalidated"), std::string::npos) << step;
  EXPECT_FALSE(graphs.enabled());
  EXPECT_EQ(graphs.Plan(1), StepMode::kEager);
}

TEST(StepGraphsTest, TurnedOffMeansAlwaysEager) {
  StepGraphs<int> graphs(4, false);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(graphs.Plan(1), StepMode::kEager);
  EXPECT_FALSE(graphs.enabled());
}

}  // namespace
}  // namespace llama
