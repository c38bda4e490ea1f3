// Which generation steps of a device backend replay a captured graph, and
// the captured graphs themselves (CUDA graphs in CudaTransformer; any
// movable type here, so the bookkeeping is tested without a GPU).
//
// A decode step (every chunk one token: every step after the prompts) runs
// the same kernels on the same buffers for a given number of rows; only
// values in device memory change (tokens, positions, block tables, sampling). So
// each row count gets one graph: run eagerly the first time (cuBLAS picks
// its kernels, NCCL sets up lazily, outside any capture), captured the
// second, replayed from then on: one launch instead of hundreds per step.
// A failed capture turns graphs off for good and keeps the reason. Alone,
// a rank then reruns the step eagerly, which is always correct. With peers
// it cannot: they replay or capture the same step, and their graphs' all-
// reduces would wait for collectives this rank never launched (or launched
// out of step), so the step fails and the job stops instead.

#ifndef LLAMA_WORKER_MODEL_STEP_GRAPHS_H_
#define LLAMA_WORKER_MODEL_STEP_GRAPHS_H_

#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "worker/model/language_model.h"

namespace llama {

enum class StepMode { kEager, kCapture, kReplay };

template <typename Graph>
class StepGraphs {
 public:
  // Steps of up to max_rows chunks can have graphs; none when !enabled.
  StepGraphs(int max_rows, bool enabled) : seen_(max_rows + 1, 0), graphs_(max_rows + 1) {
    if (!enabled) disabled_ = absl::CancelledError("CUDA graphs were turned off");
  }

  // The graph key of a step: its row count when every chunk is one token
  // and asks for one row of logits, else nullopt (prefill runs eagerly).
  std::optional<int> KeyOf(absl::Span<const SequenceChunk> chunks) const {
    if (chunks.empty() || chunks.size() >= seen_.size()) return std::nullopt;
    for (const SequenceChunk& chunk : chunks) {
      if (chunk.tokens.size() != 1 || chunk.all_logits) return std::nullopt;
    }
    return static_cast<int>(chunks.size());
  }

  // What to do with a step of this key, counting it as seen.
  StepMode Plan(std::optional<int> key) {
    if (!key.has_value() || !disabled_.ok()) return StepMode::kEager;
    if (graphs_[*key].has_value()) return StepMode::kReplay;
    return ++seen_[*key] >= 2 ? StepMode::kCapture : StepMode::kEager;
  }

  void Captured(int key, Graph graph) {
    graphs_[key].emplace(std::move(graph));
    ++captures_;
  }

  // Turns graphs off (dropping any captured) and keeps why. Returns OK when
  // the step may be rerun eagerly (world_size 1), else the step's error.
  absl::Status CaptureFailed(absl::Status why, int world_size) {
    disabled_ = std::move(why);
    for (std::optional<Graph>& graph : graphs_) graph.reset();
    if (world_size == 1) return absl::OkStatus();
    return absl::InternalError(absl::StrCat(
        "capturing a CUDA graph failed with ", world_size,
        " ranks, whose peers replay theirs; rerun with --cuda_graphs=false: ", disabled_.ToString()));
  }

  Graph& graph(int key) { return *graphs_[key]; }
  bool enabled() const { return disabled_.ok(); }
  const absl::Status& disabled_reason() const { return disabled_; }
  int captures() const { return captures_; }

 private:
  std::vector<int> seen_;
  std::vector<std::optional<Graph>> graphs_;
  absl::Status disabled_;
  int captures_ = 0;
};

}  // namespace llama

#endif  // LLAMA_WORKER_MODEL_STEP_GRAPHS_H_
