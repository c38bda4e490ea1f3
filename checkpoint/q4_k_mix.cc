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

}  // namespace

DType Q4KMixDType(absl::string_view name, int64_t n_layers) {
  if (name == "output.weight") return DType::kQ6_K;
  const std::optional<LayerTensorName> layer = ParseLayerName(name, TensorNaming::kMeta);
  if (layer.has_value() && (layer->name == "attention.wv.weight" || layer->name == "feed_forward.w2.weight") &&
      TakesMoreBits(layer->layer, n_layers)) {
    return DType::kQ6_K;
  }
  return DType::kQ4_K;
}

}  // namespace llama
