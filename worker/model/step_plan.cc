#include "worker/model/step_plan.h"

#include "absl/strings/str_format.h"

namespace llama {

absl::Status PlanStep(absl::Span<const SequenceChunk> chunks, const StepLimits& limits, StepPlan& plan) {
  plan.tokens.clear();
  plan.positions.clear();
  plan.slots.clear();
  plan.logit_rows.clear();
  plan.chunks.clear();
  plan.decode_only = true;
  int64_t total = 0;
  for (const SequenceChunk& chunk : chunks) total += chunk.tokens.size();
  if (total > limits.max_step_tokens) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%d tokens in one step; at most %d", total, limits.max_step_tokens));
  }
  for (size_t c = 0; c < chunks.size(); ++c) {
    const SequenceChunk& chunk = chunks[c];
    const int64_t len = chunk.tokens.size();
    if (chunk.slot < 0 || chunk.slot >= limits.max_batch_size) {
      return absl::InvalidArgumentError(absl::StrFormat("chunk %d: KV slot %d outside [0, %d)", c, chunk.slot,
                                                        limits.max_batch_size));
    }
    if (len == 0 || chunk.start_pos < 0 || chunk.start_pos + len > limits.max_seq_len) {
      return absl::InvalidArgumentError(absl::StrFormat("chunk %d: positions [%d, %d) do not fit max_seq_len %d", c,
                                                        chunk.start_pos, chunk.start_pos + len, limits.max_seq_len));
    }
    const int64_t first_row = plan.n();
    plan.chunks.push_back({chunk.slot, chunk.start_pos, len, first_row});
    for (int64_t i = 0; i < len; ++i) {
      const int token = chunk.tokens[i];
      if (token < 0 || token >= limits.vocab_size) {
        return absl::InvalidArgumentError(
            absl::StrFormat("chunk %d: token id %d outside the vocabulary [0, %d)", c, token, limits.vocab_size));
      }
      plan.tokens.push_back(token);
      plan.positions.push_back(static_cast<int32_t>(chunk.start_pos + i));
      plan.slots.push_back(chunk.slot);
      if (chunk.all_logits || i == len - 1) plan.logit_rows.push_back(static_cast<int32_t>(first_row + i));
    }
    plan.decode_only &= len == 1 && !chunk.all_logits;
  }
  return absl::OkStatus();
}

}  // namespace llama
