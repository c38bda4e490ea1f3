#include "worker/model/rank_plan.h"

#include <algorithm>
#include <fstream>
#include <thread>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "checkpoint/llama_layout.h"
#include "ops/kv_cache_view.h"

namespace llama {
namespace {

absl::Status CheckOptions(const TransformerOptions& options) {
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
  return absl::OkStatus();
}

absl::Status CheckWeights(const ModelWeights& weights, const RankGeometry& geometry) {
  const ModelConfig& c = weights.config;
  if (weights.layers.size() != static_cast<size_t>(c.n_layers)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "model config: vocab_size %d and %d layers of weights for n_layers %d", c.vocab_size, weights.layers.size(),
        c.n_layers));
  }
  if (geometry.rank != weights.rank || geometry.world_size != weights.world_size) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the shard is for rank %d of %d but this process is rank %d of %d; convert for world size %d "
        "(//tools:convert --world_size=%d)",
        weights.rank, weights.world_size, geometry.rank, geometry.world_size, geometry.world_size,
        geometry.world_size));
  }
  if (weights.layers[0].wk.dim(0) != geometry.kv_width()) {
    return absl::InvalidArgumentError(absl::StrFormat("wk holds %d rows; rank %d of %d expects %d",
                                                      weights.layers[0].wk.dim(0), geometry.rank,
                                                      geometry.world_size, geometry.kv_width()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RankPlan> PlanRank(const ModelWeights& weights, int rank, int world_size,
                                  const TransformerOptions& options) {
  RETURN_IF_ERROR(CheckOptions(options));
  RankPlan plan;
  ASSIGN_OR_RETURN(plan.geometry, ComputeRankGeometry(weights.config, rank, world_size));
  RETURN_IF_ERROR(CheckWeights(weights, plan.geometry));
  plan.limits = {weights.config.vocab_size, options.max_batch_size, options.max_seq_len, options.max_step_tokens,
                 options.kv_block_size, 0};
  plan.threads = options.threads > 0 ? options.threads
                                     : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  plan.kv_cache_dtype = options.kv_cache_dtype;
  plan.int8_prefill = options.int8_prefill;
  plan.bf16_activations = options.bf16_activations;
  plan.cuda_graphs = options.cuda_graphs;
  int64_t blocks = options.max_batch_size * plan.limits.blocks_per_sequence();
  if (options.kv_blocks > 0) {
    blocks = options.kv_blocks;
  } else if (options.kv_cache_bytes > 0) {
    blocks = std::max<int64_t>(1, KvBlocksInBytes(plan, options.kv_cache_bytes));
  }
  RETURN_IF_ERROR(SetKvBlocks(plan, blocks));
  return plan;
}

absl::Status SetKvBlocks(RankPlan& plan, int64_t blocks) {
  const ModelLimits& l = plan.limits;
  if (blocks < l.blocks_per_sequence()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a KV cache of %d blocks of %d positions cannot hold one sequence of --max_seq_len=%d (%d blocks); "
        "give it more memory (--kv_cache_gb) or lower --max_seq_len",
        blocks, l.kv_block_size, l.max_seq_len, l.blocks_per_sequence()));
  }
  plan.limits.kv_blocks = blocks;
  return absl::OkStatus();
}

int64_t KvBlocksInBytes(const RankPlan& plan, double bytes) {
  return static_cast<int64_t>(bytes / KvCacheBytes(plan.geometry, plan.limits.kv_block_size, plan.kv_cache_dtype));
}

double WeightBytes(const RankGeometry& g, DType dtype) {
  double elements = 0;
  for (const TensorSpec& spec : LlamaTensors(g.config)) {
    double n = 1;
    for (int64_t d : RankShape(spec, g.config, g.rank, g.world_size)) n *= d;
    elements += n;
  }
  return static_cast<double>(TensorBytes(dtype, static_cast<int64_t>(elements)));
}

double EmbeddingBytes(const RankGeometry& g, DType dtype) {
  return static_cast<double>(g.config.vocab_size) * g.local_dim * DTypeSize(dtype);
}

double KvCacheBytes(const RankGeometry& g, int64_t positions, DType cache_dtype) {
  return 2.0 * g.config.n_layers * positions * g.kv_width() * DTypeSize(cache_dtype);
}

double KvCacheBytes(const RankPlan& plan) {
  return KvCacheBytes(plan.geometry, plan.limits.kv_blocks * plan.limits.kv_block_size, plan.kv_cache_dtype);
}

std::vector<WorkBuffer> WorkBuffers(const RankGeometry& g, Sampling sampling) {
  const ModelConfig& c = g.config;
  std::vector<WorkBuffer> buffers = {
      {&Activations::x, c.dim},
      {&Activations::xb, c.dim},
      {&Activations::q, g.q_width()},
      {&Activations::k, g.kv_width()},
      {&Activations::v, g.kv_width()},
      {&Activations::attention, g.q_width()},
      {&Activations::projection, c.dim},
      {&Activations::gate, g.local_hidden},
      {&Activations::up, g.local_hidden},
      {&Activations::gathered, std::max(c.dim, c.vocab_size)},
      {&Activations::logits_local, g.local_vocab},
      {&Activations::logits, c.vocab_size},
  };
  if (sampling == Sampling::kOnDevice) buffers.push_back({&Activations::probabilities, c.vocab_size});
  return buffers;
}

double WorkBytes(const RankPlan& plan, Sampling sampling) {
  double per_token = 0;
  for (const WorkBuffer& b : WorkBuffers(plan.geometry, sampling)) per_token += b.width;
  return per_token * plan.limits.max_step_tokens * sizeof(float);
}

absl::Status CheckMemory(const RankPlan& plan, Sampling sampling, double weight_bytes, double free_bytes,
                         const char* where) {
  const double cache_bytes = KvCacheBytes(plan);
  const double work_bytes = WorkBytes(plan, sampling);
  if (free_bytes <= 0 || weight_bytes + cache_bytes + work_bytes <= free_bytes) return absl::OkStatus();
  // Weights counted only where they are copied (a GPU); mapped ones are not.
  const std::string weights = weight_bytes > 0 ? absl::StrFormat("the weights (%.2f GB), ", weight_bytes / 1e9) : "";
  return absl::ResourceExhaustedError(absl::StrFormat(
      "%sthe KV cache (%.2f GB: %d blocks of %d positions, %s) and work buffers (%.2f GB) need more than the "
      "%.2f GB free on %s; lower --kv_cache_gb (or --max_batch_size and --max_seq_len, which size it by "
      "default), use --kv_cache_dtype=bf16, or split the model over more ranks",
      weights, cache_bytes / 1e9, plan.limits.kv_blocks, plan.limits.kv_block_size, DTypeName(plan.kv_cache_dtype),
      work_bytes / 1e9, free_bytes / 1e9, where));
}

RopeTable RopeTableOf(const RankPlan& plan) {
  const ModelConfig& c = plan.config();
  return RopeTable(plan.geometry.head_dim, 2 * plan.limits.max_seq_len, c.rope_theta, c.rope_scaling);
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

}  // namespace llama
