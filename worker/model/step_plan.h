// One model step, planned once from the generator's chunks and consumed by
// every backend: each token's id, position and block table, the rows whose
// logits are wanted, and each chunk's place in the step. Planning is where
// a step's inputs are checked, with one set of messages for every device.

#ifndef LLAMA_WORKER_MODEL_STEP_PLAN_H_
#define LLAMA_WORKER_MODEL_STEP_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "ops/kv_cache_view.h"
#include "worker/model/language_model.h"

namespace llama {

struct PlannedChunk {
  int64_t start_pos = 0;
  int64_t len = 0;
  int64_t first_row = 0;  // Its first token's row in the step.
};

struct StepPlan {
  // Per token of the step, [n]; table_of: its chunk's block table (the
  // chunk's index).
  std::vector<int32_t> tokens, positions, table_of;
  // Chunk c's block table at [c * table_stride, (c + 1) * table_stride),
  // padded with block 0 beyond what the chunk reaches.
  std::vector<int32_t> block_tables;
  int64_t table_stride = 0;
  int64_t block_size = 0;
  // Step rows whose logits are wanted, [rows]: every row of an all_logits
  // chunk, else each chunk's last proposed + 1.
  std::vector<int32_t> logit_rows;
  std::vector<PlannedChunk> chunks;
  // Every chunk is one token asking for one row (a decode step).
  bool decode_only = true;

  int64_t n() const { return static_cast<int64_t>(tokens.size()); }
  int64_t rows() const { return static_cast<int64_t>(logit_rows.size()); }
  const int32_t* table(int64_t chunk) const { return block_tables.data() + chunk * table_stride; }
};

// Checks the chunks against `limits` and fills `plan` (its vectors are
// reused, so a step allocates nothing once they have grown). Errors name
// the chunk and the limit.
absl::Status PlanStep(absl::Span<const SequenceChunk> chunks, const ModelLimits& limits, StepPlan& plan);

}  // namespace llama

#endif  // LLAMA_WORKER_MODEL_STEP_PLAN_H_
