#include "worker/model/model_weights.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "checkpoint/llama_layout.h"

namespace llama {

ModelWeights AssembleModelWeights(const ModelConfig& config, std::vector<Tensor> tensors) {
  // LlamaTensors' order: embeddings, then each layer's kLayerTensors, then
  // norm and output.
  ModelWeights weights;
  weights.config = config;
  size_t next = 0;
  weights.tok_embeddings = tensors[next++];
  for (int64_t i = 0; i < config.n_layers; ++i) {
    LayerWeights layer;
    for (Tensor LayerWeights::*t : kLayerTensors) layer.*t = tensors[next++];
    weights.layers.push_back(std::move(layer));
  }
  weights.norm = tensors[next++];
  weights.output = tensors[next++];
  return weights;
}

double StoredWeightBytes(const ModelWeights& w) {
  double bytes = static_cast<double>(w.tok_embeddings.bytes() + w.norm.bytes() + w.output.bytes());
  for (const LayerWeights& l : w.layers) {
    for (Tensor LayerWeights::*t : kLayerTensors) bytes += static_cast<double>((l.*t).bytes());
  }
  return bytes;
}

std::optional<DType> FirstBlockDType(const ModelWeights& w) {
  for (const LayerWeights& l : w.layers) {
    for (Tensor LayerWeights::*t : kLayerLinears) {
      if (IsBlockDType((l.*t).dtype())) return (l.*t).dtype();
    }
  }
  if (IsBlockDType(w.output.dtype())) return w.output.dtype();
  return std::nullopt;
}

absl::StatusOr<ModelWeights> LoadModelWeights(std::shared_ptr<const ShardReader> shard) {
  ModelWeights weights;
  const shard::ShardIndex& index = shard->index();
  weights.config = ModelConfigFromProto(index.config());
  weights.rank = index.rank();
  weights.world_size = index.world_size();
  if (index.rope_layout() != shard::ROPE_LAYOUT_INTERLEAVED) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: rotary layout %d is not Meta's interleaved layout; re-convert from Meta's checkpoint",
        shard->path(), index.rope_layout()));
  }
  if (absl::Status s = CheckWorldSize(weights.config, weights.world_size); !s.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(shard->path(), ": ", s.message()));
  }
  const auto view = [&](const TensorSpec& spec) -> absl::StatusOr<Tensor> {
    ASSIGN_OR_RETURN(ShardTensor t, shard->Tensor(spec.name));
    const std::vector<int64_t> expected = RankShape(spec, weights.config, weights.rank, weights.world_size);
    const std::vector<int64_t> shape(t.entry->shape().begin(), t.entry->shape().end());
    if (shape != expected) {
      return absl::FailedPreconditionError(absl::StrFormat("%s: tensor \"%s\" has shape [%s]; expected [%s]",
                                                           shard->path(), spec.name, absl::StrJoin(shape, ", "),
                                                           absl::StrJoin(expected, ", ")));
    }
    // Block types (int8 = q8_0, q4_k, q6_k) only where //tools:convert puts them:
    // the linear layers, whose kernels read them.
    const bool linear = spec.shape.size() == 2 && spec.name != "tok_embeddings.weight";
    if (!IsFloat16Or32(t.dtype) && !(IsBlockDType(t.dtype) && linear)) {
      return absl::FailedPreconditionError(absl::StrFormat("%s: tensor \"%s\" is %s; expected f32, f16 or bf16%s",
                                                           shard->path(), spec.name, DTypeName(t.dtype),
                                                           linear ? ", q8_0, q4_k or q6_k" : ""));
    }
    return Tensor::View(t.dtype, shape, t.bytes.data());
  };
  const std::vector<TensorSpec> specs = LlamaTensors(weights.config);
  std::vector<Tensor> tensors;
  for (const TensorSpec& spec : specs) {
    ASSIGN_OR_RETURN(Tensor t, view(spec));
    tensors.push_back(std::move(t));
  }
  ModelWeights assembled = AssembleModelWeights(weights.config, std::move(tensors));
  assembled.rank = weights.rank;
  assembled.world_size = weights.world_size;
  assembled.kv_head_begin = static_cast<int>(FirstKvHead(weights.config, weights.rank, weights.world_size));
  assembled.shard = std::move(shard);
  return assembled;
}

}  // namespace llama
