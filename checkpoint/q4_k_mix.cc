#include "checkpoint/q4_k_mix.h"

#include <optional>

#include "checkpoint/llama_layout.h"

namespace llama {

namespace {

// Whether layer `layer` of `n_layers` is one llama.cpp gives more bits:
// the first and last eighth (rounded down), and every third between,
// counted from the first eighth's end.
bool TakesMoreBits(int64_t layer, int64_t n_layers) {
  return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

// llama.cpp's LLM_TYPE_70B for the Llama architecture: 80 layers whose
// key and value heads are fewer than the query heads (LLaMA 65B has as
// many).
bool Is70B(const ModelConfig& config) { return config.n_layers == 80 && config.n_kv_heads < config.n_heads; }

}  // namespace

DType Q4KMixDType(absl::string_view name, const ModelConfig& config) {
  if (name == "output.weight") return DType::kQ6_K;
  const std::optional<LayerTensorName> layer = ParseLayerName(name, TensorNaming::kMeta);
  if (!layer.has_value()) return DType::kQ4_K;
  const bool value = layer->name == "attention.wv.weight", down = layer->name == "feed_forward.w2.weight";
  if ((value || down) && TakesMoreBits(layer->layer, config.n_layers)) return DType::kQ6_K;
  return value && Is70B(config) ? DType::kQ6_K : DType::kQ4_K;
}

}  // namespace llama
