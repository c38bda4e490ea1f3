#include "worker/synthetic_weights.h"

#include <cmath>
#include <vector>

#include "checkpoint/llama_layout.h"
#include "ops/cast.h"

namespace llama {

std::vector<Tensor> SyntheticTensors(const ModelConfig& config, DType dtype, uint64_t seed, int rank,
                                     int world_size) {
  seed = seed * 1000003 + rank;
  // A xorshift stream: a billion values take seconds, where
  // std::normal_distribution takes a minute.
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 88172645463325252ull;
  const auto uniform = [&state] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return (static_cast<float>(state >> 40) / 16777216.0f * 2.0f - 1.0f) * 1.7320508f;
  };
  std::vector<Tensor> tensors;
  for (const TensorSpec& spec : LlamaTensors(config)) {
    Tensor t = Tensor::Zeros(dtype, RankShape(spec, config, rank, world_size));
    const bool matrix = spec.shape.size() == 2;
    const float scale = matrix ? 1.0f / std::sqrt(static_cast<float>(spec.shape[1])) : 0.0f;
    const int64_t count = t.numel();
    for (int64_t i = 0; i < count; ++i) {
      const float value = matrix ? uniform() * scale : 1.0f;
      switch (dtype) {
        case DType::kF32:
          t.mutable_f32()[i] = value;
          break;
        case DType::kF16:
          static_cast<uint16_t*>(t.mutable_raw())[i] = F32ToF16(value);
          break;
        default:
          static_cast<uint16_t*>(t.mutable_raw())[i] = F32ToBf16(value);
          break;
      }
    }
    tensors.push_back(t);
  }
  return tensors;
}

ModelWeights SyntheticWeights(const ModelConfig& config, DType dtype, uint64_t seed, int rank, int world_size) {
  ModelWeights weights = AssembleModelWeights(config, SyntheticTensors(config, dtype, seed, rank, world_size));
  weights.rank = rank;
  weights.world_size = world_size;
  weights.kv_head_begin = static_cast<int>(FirstKvHead(config, rank, world_size));
  return weights;
}

}  // namespace llama
