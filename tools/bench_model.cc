#include "tools/bench_model.h"

#include <memory>

#include "base/status_macros.h"
#include "checkpoint/shard_format.h"
#include "ops/dtype.h"
#include "worker/model/synthetic_weights.h"

DEFINE_string(shard, "", "A shard to benchmark (world size 1); default: a synthetic model.");

// The synthetic model's shape, once: X(flag, ModelConfig field, default,
// help), for the flags, the config and --help.
#define LLAMA_BENCH_SHAPE_FLAGS(X)                                     \
  X(dim, dim, 2048, "Synthetic model: embedding dimension.")           \
  X(n_layers, n_layers, 22, "Synthetic model: layers.")                \
  X(n_heads, n_heads, 32, "Synthetic model: query heads.")             \
  X(n_kv_heads, n_kv_heads, 4, "Synthetic model: key/value heads.")    \
  X(ffn_hidden, hidden_dim, 5632, "Synthetic model: FFN hidden size.") \
  X(vocab_size, vocab_size, 32000, "Synthetic model: vocabulary.")

#define LLAMA_DEFINE_BENCH_SHAPE_FLAG(flag, field, default_value, help) DEFINE_int64(flag, default_value, help);
LLAMA_BENCH_SHAPE_FLAGS(LLAMA_DEFINE_BENCH_SHAPE_FLAG)
#undef LLAMA_DEFINE_BENCH_SHAPE_FLAG

DEFINE_string(weights_dtype, "bf16",
              "Synthetic model: weights' type, bf16, fp16, fp32, int8 (q8_0 linear layers, bf16 embedding) or q4_k "
              "(linear layers in llama.cpp's Q4_K_M mix of q4_k and q6_k, bf16 embedding, as convert --dtype=q4_k writes them).");

namespace llama {

absl::StatusOr<ModelWeights> BenchModelWeights(int rank, int world_size) {
  if (!FLAGS_shard.empty()) {
    ASSIGN_OR_RETURN(std::unique_ptr<ShardReader> shard, ShardReader::Open(FLAGS_shard));
    return LoadModelWeights(std::shared_ptr<const ShardReader>(std::move(shard)));
  }
  ModelConfig config;
#define LLAMA_COPY_BENCH_SHAPE_FLAG(flag, field, default_value, help) config.field = FLAGS_##flag;
  LLAMA_BENCH_SHAPE_FLAGS(LLAMA_COPY_BENCH_SHAPE_FLAG)
#undef LLAMA_COPY_BENCH_SHAPE_FLAG
  RETURN_IF_ERROR(ValidateModelConfig(config, "synthetic model"));
  RETURN_IF_ERROR(CheckWorldSize(config, world_size));
  ASSIGN_OR_RETURN(const DType dtype, ParseWeightsDtypeFlag("weights_dtype", FLAGS_weights_dtype));
  return SyntheticWeights(config, dtype, 1, rank, world_size);
}

FlagGroup BenchModelFlags() {
  FlagGroup group{"The model", {"shard"}};
#define LLAMA_BENCH_SHAPE_FLAG_NAME(flag, field, default_value, help) group.flags.push_back(#flag);
  LLAMA_BENCH_SHAPE_FLAGS(LLAMA_BENCH_SHAPE_FLAG_NAME)
#undef LLAMA_BENCH_SHAPE_FLAG_NAME
  group.flags.push_back("weights_dtype");
  return group;
}

}  // namespace llama
