// One rank's weights, as views into its mapped shard (never copied).
//
// Shapes (this rank's slice; hd = head_dim, ws = world size):
//   tok_embeddings [vocab, dim / ws]      attention_norm, ffn_norm, norm [dim]
//   wq [n_heads / ws * hd, dim]           wk, wv [local_kv_heads * hd, dim]
//   wo [dim, n_heads / ws * hd]           w1, w3 [hidden / ws, dim]
//   w2 [dim, hidden / ws]                 output [vocab / ws, dim]

#ifndef LLAMA_WORKER_MODEL_MODEL_WEIGHTS_H_
#define LLAMA_WORKER_MODEL_MODEL_WEIGHTS_H_

#include <array>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/model_config.h"
#include "checkpoint/shard_format.h"
#include "ops/tensor.h"

namespace llama {

struct LayerWeights {
  Tensor attention_norm;
  Tensor wq, wk, wv, wo;
  Tensor ffn_norm;
  Tensor w1, w2, w3;
};

// A layer's linear weights, then its norms: LlamaTensors' order within a
// layer.
inline constexpr std::array<Tensor LayerWeights::*, 7> kLayerLinears = {
    &LayerWeights::wq, &LayerWeights::wk, &LayerWeights::wv, &LayerWeights::wo,
    &LayerWeights::w1, &LayerWeights::w2, &LayerWeights::w3};
inline constexpr std::array<Tensor LayerWeights::*, 9> kLayerTensors = {
    &LayerWeights::wq, &LayerWeights::wk, &LayerWeights::wv,         &LayerWeights::wo,      &LayerWeights::w1,
    &LayerWeights::w2, &LayerWeights::w3, &LayerWeights::attention_norm, &LayerWeights::ffn_norm};

struct ModelWeights {
  ModelConfig config;
  int rank = 0;
  int world_size = 1;
  int kv_head_begin = 0;  // Global index of this rank's first KV head.
  Tensor tok_embeddings;
  std::vector<LayerWeights> layers;
  Tensor norm;
  Tensor output;
  // Keeps the mapping alive while the views are in use.
  std::shared_ptr<const ShardReader> shard;
};

// Builds the struct from tensors in LlamaTensors(config) order.
ModelWeights AssembleModelWeights(const ModelConfig& config, std::vector<Tensor> tensors);

// The bytes of every tensor as stored: a GGUF import mixes types (q4_k
// layers beside f16 ones), so no single dtype gives them.
double StoredWeightBytes(const ModelWeights& w);

// The block type (q8_0, q4_k) of the first linear weight stored in one, if
// any: for the paths that run only float weights.
std::optional<DType> FirstBlockDType(const ModelWeights& w);

// Views every tensor of `shard`, checking names, shapes and dtypes against
// its config and rank. Errors name the shard file and the tensor.
absl::StatusOr<ModelWeights> LoadModelWeights(std::shared_ptr<const ShardReader> shard);

}  // namespace llama

#endif  // LLAMA_WORKER_MODEL_MODEL_WEIGHTS_H_
