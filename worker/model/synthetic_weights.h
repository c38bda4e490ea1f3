// Random weights of any Llama 2 shape, held in memory: for benchmarks of
// shapes we have no checkpoint for, and tests that need to plant a value.

#ifndef LLAMA_WORKER_MODEL_SYNTHETIC_WEIGHTS_H_
#define LLAMA_WORKER_MODEL_SYNTHETIC_WEIGHTS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

#include "checkpoint/model_config.h"
#include "ops/dtype.h"
#include "worker/model/model_weights.h"

namespace llama {

// Rank `rank` of `world_size`'s slice (shapes as converted shards have
// them). Matrices are uniform with unit variance scaled by
// 1/sqrt(in_features) (activations stay O(1) through the layers); norm
// weights are 1. Deterministic for a given `seed` and rank; slices of
// different world sizes are not slices of one model (for benchmarks). The
// config must be valid with a known vocab_size, and split `world_size` ways.
absl::StatusOr<ModelWeights> SyntheticWeights(const ModelConfig& config, DType dtype, uint64_t seed = 1, int rank = 0,
                              int world_size = 1);

// The same tensors, in LlamaTensors(config) order (for writing checkpoints).
absl::StatusOr<std::vector<Tensor>> SyntheticTensors(const ModelConfig& config, DType dtype, uint64_t seed = 1, int rank = 0,
                                     int world_size = 1);

}  // namespace llama

#endif  // LLAMA_WORKER_MODEL_SYNTHETIC_WEIGHTS_H_
