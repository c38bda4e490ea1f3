// Rotary position embeddings in Meta's layout: within each head, element
// pairs (2i, 2i+1) are a complex number rotated by pos * theta^(-2i/hd)
// (the reference's precompute_freqs_cis + apply_rotary_emb).

#ifndef LLAMA_OPS_ROPE_TABLE_H_
#define LLAMA_OPS_ROPE_TABLE_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "ops/rope_scaling.h"

namespace llama {

// The head_dim / 2 rotary frequencies: theta^(-2i/hd) in f32 as the
// reference computes them, scaled as Llama 3.1's when `scaling` is given.
std::vector<float> RopeFrequencies(int64_t head_dim, double theta, const std::optional<RopeScaling>& scaling);

class RopeTable {
 public:
  // cos/sin for positions [0, positions) — the reference builds
  // 2 * max_seq_len — and head_dim / 2 frequencies, scaled as Llama 3.1's
  // when `scaling` is given.
  RopeTable(int64_t head_dim, int64_t positions, double theta,
            const std::optional<RopeScaling>& scaling = std::nullopt);

  int64_t positions() const { return positions_; }

  // Rotates `heads` consecutive heads of `x` ([heads, head_dim]) for `pos`.
  void Apply(float* x, int64_t heads, int64_t pos) const;

  // The tables, [positions, head_dim / 2] (uploaded by the CUDA backend).
  const std::vector<float>& cos_table() const { return cos_; }
  const std::vector<float>& sin_table() const { return sin_; }

 private:
  int64_t half_;
  int64_t positions_;
  std::vector<float> cos_;  // [positions, half]
  std::vector<float> sin_;
};

}  // namespace llama

#endif  // LLAMA_OPS_ROPE_TABLE_H_
