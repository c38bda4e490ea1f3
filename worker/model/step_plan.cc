#include "worker/model/step_plan.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace llama {

absl::Status PlanStep(absl::Span<const SequenceChunk> chunks, const ModelLimits& limits, StepPlan& plan) {
  plan.tokens.clear();
  plan.positions.clear();
  plan.table_of.clear();
  plan.block_tables.clear();
  plan.logit_rows.clear();
  plan.chunks.clear();
  plan.decode_only = true;
  plan.table_stride = limits.blocks_per_sequence();
  plan.block_size = limits.kv_block_size;
  int64_t total = 0;
  for (const SequenceChunk& chunk : chunks) total += chunk.tokens.size();
  if (total > limits.max_step_tokens) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%d tokens in one step; at most %d", total, limits.max_step_tokens));
  }
  if (static_cast<int64_t>(chunks.size()) > limits.max_batch_size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%d sequences in one step; at most %d", chunks.size(), limits.max_batch_size));
  }
  for (size_t c = 0; c < chunks.size(); ++c) {
    const SequenceChunk& chunk = chunks[c];
    const int64_t len = chunk.tokens.size();
    if (len == 0 || chunk.start_pos < 0 || chunk.start_pos + len > limits.max_seq_len) {
      return absl::InvalidArgumentError(absl::StrFormat("chunk %d: positions [%d, %d) do not fit max_seq_len %d", c,
                                                        chunk.start_pos, chunk.start_pos + len, limits.max_seq_len));
    }
    if (chunk.proposed < 0 || chunk.proposed >= len) {
      return absl::InvalidArgumentError(
          absl::StrFormat("chunk %d: %d proposed tokens in a chunk of %d", c, chunk.proposed, len));
    }
    const int64_t blocks_needed = KvBlocksFor(chunk.start_pos + len, limits.kv_block_size);
    if (static_cast<int64_t>(chunk.blocks.size()) < blocks_needed) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "chunk %d: a block table of %d blocks for positions up to %d; %d blocks of %d positions needed", c,
          chunk.blocks.size(), chunk.start_pos + len, blocks_needed, limits.kv_block_size));
    }
    for (int64_t b = 0; b < blocks_needed; ++b) {
      if (chunk.blocks[b] < 0 || chunk.blocks[b] >= limits.kv_blocks) {
        return absl::InvalidArgumentError(absl::StrFormat("chunk %d: KV block %d outside the cache's [0, %d)", c,
                                                          chunk.blocks[b], limits.kv_blocks));
      }
    }
    plan.block_tables.insert(plan.block_tables.end(), chunk.blocks.begin(), chunk.blocks.begin() + blocks_needed);
    plan.block_tables.resize((c + 1) * plan.table_stride, 0);
    const int64_t first_row = plan.n();
    plan.chunks.push_back({chunk.start_pos, len, first_row});
    for (int64_t i = 0; i < len; ++i) {
      const int token = chunk.tokens[i];
      if (token < 0 || token >= limits.vocab_size) {
        return absl::InvalidArgumentError(
            absl::StrFormat("chunk %d: token id %d outside the vocabulary [0, %d)", c, token, limits.vocab_size));
      }
      plan.tokens.push_back(token);
      plan.positions.push_back(static_cast<int32_t>(chunk.start_pos + i));
      plan.table_of.push_back(static_cast<int32_t>(c));
      if (chunk.all_logits || i >= len - 1 - chunk.proposed) plan.logit_rows.push_back(static_cast<int32_t>(first_row + i));
    }
    plan.decode_only &= len == 1 && !chunk.all_logits;
  }
  return absl::OkStatus();
}

}  // namespace llama
