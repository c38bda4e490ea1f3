#include "worker/model/model_options.h"

#include <fstream>
#include <string>

#include "absl/strings/str_format.h"
#include "ops/status_macros.h"

namespace llama {

absl::StatusOr<RankGeometry> CheckModel(const ModelWeights& weights, int rank, int world_size,
                                        const TransformerOptions& options) {
  const ModelConfig& c = weights.config;
  RETURN_IF_ERROR(ValidateModelConfig(c, "model config"));
  if (c.vocab_size <= 0 || weights.layers.size() != static_cast<size_t>(c.n_layers)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "model config: vocab_size %d and %d layers of weights for n_layers %d", c.vocab_size, weights.layers.size(),
        c.n_layers));
  }
  if (rank != weights.rank || world_size != weights.world_size) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the shard is for rank %d of %d but this process is rank %d of %d; convert for world size %d "
        "(//tools:convert --world_size=%d)",
        weights.rank, weights.world_size, rank, world_size, world_size, world_size));
  }
  if (!IsFloat16Or32(options.kv_cache_dtype)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--kv_cache_dtype=%s: expected f32, bf16 or f16", DTypeName(options.kv_cache_dtype)));
  }
  if (options.max_batch_size < 1 || options.max_seq_len < 1 || options.max_step_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--max_batch_size (%d), --max_seq_len (%d) and the step size (%d) must be positive", options.max_batch_size,
        options.max_seq_len, options.max_step_tokens));
  }
  if (options.kv_block_size < 1 || options.kv_blocks < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--kv_block_size (%d) must be positive and the KV cache's block count (%d) not negative",
        options.kv_block_size, options.kv_blocks));
  }
  const int64_t sequence_blocks = StepLimitsOf(options, c.vocab_size).table_stride();
  if (KvBlocksOf(options) < sequence_blocks) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a KV cache of %d blocks of %d positions cannot hold one sequence of --max_seq_len=%d (%d blocks); "
        "give it more memory (--kv_cache_gb) or lower --max_seq_len",
        KvBlocksOf(options), options.kv_block_size, options.max_seq_len, sequence_blocks));
  }
  ASSIGN_OR_RETURN(RankGeometry geometry, ComputeRankGeometry(c, rank, world_size));
  if (weights.layers[0].wk.dim(0) != geometry.kv_width()) {
    return absl::InvalidArgumentError(absl::StrFormat("wk holds %d rows; rank %d of %d expects %d",
                                                      weights.layers[0].wk.dim(0), rank, world_size,
                                                      geometry.kv_width()));
  }
  return geometry;
}

absl::Status CheckMemory(const RankGeometry& geometry, const TransformerOptions& options, double weight_bytes,
                         double free_bytes, const char* where) {
  const int64_t blocks = KvBlocksOf(options);
  const double cache_bytes = geometry.KvCacheBytes(blocks * options.kv_block_size, options.kv_cache_dtype);
  const double work_bytes = geometry.WorkBytes(options.max_step_tokens);
  if (free_bytes <= 0 || weight_bytes + cache_bytes + work_bytes <= free_bytes) return absl::OkStatus();
  // Weights counted only where they are copied (a GPU); mapped ones are not.
  const std::string weights = weight_bytes > 0 ? absl::StrFormat("the weights (%.2f GB), ", weight_bytes / 1e9) : "";
  return absl::ResourceExhaustedError(absl::StrFormat(
      "%sthe KV cache (%.2f GB: %d blocks of %d positions, %s) and work buffers (%.2f GB) need more than the "
      "%.2f GB free on %s; lower --kv_cache_gb (or --max_batch_size and --max_seq_len, which size it by "
      "default), use --kv_cache_dtype=bf16, or split the model over more ranks",
      weights, cache_bytes / 1e9, blocks, options.kv_block_size, DTypeName(options.kv_cache_dtype), work_bytes / 1e9,
      free_bytes / 1e9, where));
}

StepLimits StepLimitsOf(const TransformerOptions& options, int64_t vocab_size) {
  return {options.max_batch_size, options.max_seq_len, options.max_step_tokens, vocab_size, options.kv_block_size,
          KvBlocksOf(options)};
}

int64_t KvBlocksInBytes(const RankGeometry& geometry, const TransformerOptions& options, double bytes) {
  return static_cast<int64_t>(bytes / geometry.KvCacheBytes(options.kv_block_size, options.kv_cache_dtype));
}

double AvailableHostMemoryBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  double kb = 0;
  while (meminfo >> key >> kb >> unit) {
    if (key == "MemAvailable:") return kb * 1024;
  }
  return 0;
}

int64_t KvBlocksOf(const TransformerOptions& options) {
  if (options.kv_blocks > 0) return options.kv_blocks;
  const int64_t per_sequence = (options.max_seq_len + options.kv_block_size - 1) / options.kv_block_size;
  return options.max_batch_size * per_sequence;
}

}  // namespace llama
