#include "worker/model/synthetic_weights.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "checkpoint/llama_layout.h"
#include "checkpoint/q4_k_mix.h"
#include "ops/cast.h"
#include "ops/quantize.h"

namespace llama {

namespace {

// Fills `t` from its own xorshift stream (a billion values take seconds,
// where std::normal_distribution takes a minute).
void Fill(Tensor& t, uint64_t stream_seed, bool matrix, float scale) {
  uint64_t state = stream_seed * 0x9E3779B97F4A7C15ull + 88172645463325252ull;
  const auto uniform = [&state] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return (static_cast<float>(state >> 40) / 16777216.0f * 2.0f - 1.0f) * 1.7320508f;
  };
  const int64_t count = t.numel();
  if (IsBlockDType(t.dtype())) {  // Drawn in f32, then quantized as the converter would.
    std::vector<float> values(count);
    for (float& v : values) v = uniform() * scale;
    uint8_t* out = static_cast<uint8_t*>(t.mutable_raw());
    // Finite by construction, whole blocks (checked by the caller).
    const absl::Status quantized = t.dtype() == DType::kQ8_0   ? QuantizeQ8_0(values.data(), count, out)
                                   : t.dtype() == DType::kQ4_K ? QuantizeQ4_K(values.data(), count, out)
                                                               : QuantizeQ6_K(values.data(), count, out);
    quantized.IgnoreError();
    return;
  }
  for (int64_t i = 0; i < count; ++i) {
    const float value = matrix ? uniform() * scale : 1.0f;
    switch (t.dtype()) {
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
}

}  // namespace

absl::StatusOr<std::vector<Tensor>> SyntheticTensors(const ModelConfig& config, DType dtype, uint64_t seed, int rank,
                                     int world_size) {
  const std::vector<TensorSpec> specs = LlamaTensors(config);
  std::vector<Tensor> tensors;
  for (const TensorSpec& spec : specs) {
    // int8 and q4_k are for the linear layers only, as convert --dtype
    // writes them (q4_k in llama.cpp's Q4_K_M mix with q6_k); the embedding
    // and norms are then bf16.
    const bool linear = spec.shape.size() == 2 && spec.name != "tok_embeddings.weight";
    const bool quantized = dtype == DType::kQ8_0 || dtype == DType::kQ4_K;
    const DType tensor_dtype = !quantized              ? dtype
                               : !linear               ? DType::kBF16
                               : dtype == DType::kQ4_K ? Q4KMixDType(spec.name, config)
                                                       : dtype;
    const std::vector<int64_t> shape = RankShape(spec, config, rank, world_size);
    if (IsBlockDType(tensor_dtype) && shape.back() % BlockElements(tensor_dtype) != 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "synthetic %s weights: tensor \"%s\" has rows of %d values; %s needs a multiple of %d", DTypeName(dtype),
          spec.name, shape.back(), DTypeName(tensor_dtype), BlockElements(tensor_dtype)));
    }
    ASSIGN_OR_RETURN(Tensor tensor, Tensor::Zeros(tensor_dtype, shape));
    tensors.push_back(std::move(tensor));
  }
  // Each tensor has its own stream, so threads can fill them in any order
  // and the values do not depend on how many there are (a 7B model takes
  // ~30 s on one core).
  const unsigned threads = std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), specs.size()));
  std::atomic<size_t> next{0};
  const auto fill = [&] {
    for (size_t i = next++; i < specs.size(); i = next++) {
      const bool matrix = specs[i].shape.size() == 2;
      const float scale = matrix ? 1.0f / std::sqrt(static_cast<float>(specs[i].shape[1])) : 0.0f;
      Fill(tensors[i], (seed * 1000003 + rank) * 1000003 + i, matrix, scale);
    }
  };
  std::vector<std::thread> workers;
  for (unsigned t = 1; t < threads; ++t) workers.emplace_back(fill);
  fill();
  for (std::thread& worker : workers) worker.join();
  return tensors;
}

absl::StatusOr<ModelWeights> SyntheticWeights(const ModelConfig& config, DType dtype, uint64_t seed, int rank,
                                              int world_size) {
  ASSIGN_OR_RETURN(std::vector<Tensor> tensors, SyntheticTensors(config, dtype, seed, rank, world_size));
  ModelWeights weights = AssembleModelWeights(config, std::move(tensors));
  weights.rank = rank;
  weights.world_size = world_size;
  weights.kv_head_begin = static_cast<int>(FirstKvHead(config, rank, world_size));
  return weights;
}

}  // namespace llama
