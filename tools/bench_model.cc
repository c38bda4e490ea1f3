#include "tools/bench_model.h"

#include <memory>

#include "checkpoint/shard_format.h"
#include "ops/dtype.h"
#include "ops/status_macros.h"
#include "worker/model/synthetic_weights.h"

DEFINE_string(shard, "", "A shard to benchmark (world size 1); default: a synthetic model.");
DEFINE_int64(dim, 2048, "Synthetic model: embedding dimension.");
DEFINE_int64(n_layers, 22, "Synthetic model: layers.");
DEFINE_int64(n_heads, 32, "Synthetic model: query heads.");
DEFINE_int64(n_kv_heads, 4, "Synthetic model: key/value heads.");
DEFINE_int64(ffn_hidden, 5632, "Synthetic model: FFN hidden size.");
DEFINE_int64(vocab_size, 32000, "Synthetic model: vocabulary.");
DEFINE_string(weights_dtype, "bf16",
              "Synthetic model: weights' type, bf16, fp16, fp32 or int8 (q8_0 linear layers, bf16 embedding).");

namespace llama {

absl::StatusOr<ModelWeights> BenchModelWeights(int rank, int world_size) {
  if (!FLAGS_shard.empty()) {
    ASSIGN_OR_RETURN(std::unique_ptr<ShardReader> shard, ShardReader::Open(FLAGS_shard));
    return LoadModelWeights(std::shared_ptr<const ShardReader>(std::move(shard)));
  }
  ModelConfig config;
  config.dim = FLAGS_dim;
  config.n_layers = FLAGS_n_layers;
  config.n_heads = FLAGS_n_heads;
  config.n_kv_heads = FLAGS_n_kv_heads;
  config.vocab_size = FLAGS_vocab_size;
  config.hidden_dim = FLAGS_ffn_hidden;
  RETURN_IF_ERROR(ValidateModelConfig(config, "synthetic model"));
  RETURN_IF_ERROR(CheckWorldSize(config, world_size));
  ASSIGN_OR_RETURN(const DType dtype, ParseWeightsDtypeFlag("weights_dtype", FLAGS_weights_dtype));
  return SyntheticWeights(config, dtype, 1, rank, world_size);
}

FlagGroup BenchModelFlags() {
  return {"The model", {"shard", "dim", "n_layers", "n_heads", "n_kv_heads", "ffn_hidden", "vocab_size",
                        "weights_dtype"}};
}

}  // namespace llama
