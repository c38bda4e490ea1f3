// Random weights of any Llama 2 shape, held in memory: for benchmarks of
// shapes we have no checkpoint for, and tests that need to plant a value.

#ifndef LLAMA_WORKER_SYNTHETIC_WEIGHTS_H_
#define LLAMA_WORKER_SYNTHETIC_WEIGHTS_H_

#include <cstdint>

#include "checkpoint/model_config.h"
#include "ops/dtype.h"
#include "worker/model_weights.h"

namespace llama {

// World size 1. Matrices are uniform with unit variance scaled by
// 1/sqrt(in_features) (activations stay O(1) through the layers); norm
// weights are 1. Deterministic for a given `seed`. The config must be
// valid with a known vocab_size.
ModelWeights SyntheticWeights(const ModelConfig& config, DType dtype, uint64_t seed = 1);

}  // namespace llama

#endif  // LLAMA_WORKER_SYNTHETIC_WEIGHTS_H_
