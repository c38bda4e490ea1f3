// The types --dtype=q4_k quantizes a checkpoint's linear layers to: the mix
// of llama.cpp's Q4_K_M preset (llama-quantize), so that our q4_k
// conversion of a Meta or Hugging Face checkpoint spends its bits where
// llama.cpp's does. Q6_K for the output projection (the logits' layer) and
// for the value projection and the FFN's down projection of the first and
// last eighth of the layers and of every third layer between; Q4_K for
// every other linear layer. A 70B-class model (80 layers, grouped-query
// attention) has llama.cpp raise its other value projections to Q5_K,
// which we neither run nor write: they take Q6_K here, one bit more on a
// tensor an eighth of wq's size (~0.2% of the file).

#ifndef LLAMA_CHECKPOINT_Q4_K_MIX_H_
#define LLAMA_CHECKPOINT_Q4_K_MIX_H_

#include "absl/strings/string_view.h"
#include "checkpoint/model_config.h"
#include "ops/dtype.h"

namespace llama {

// q4_k or q6_k for the linear weight `name` (Meta's naming: "output.weight",
// "layers.3.attention.wv.weight") of the model `config` describes.
DType Q4KMixDType(absl::string_view name, const ModelConfig& config);

}  // namespace llama

#endif  // LLAMA_CHECKPOINT_Q4_K_MIX_H_
