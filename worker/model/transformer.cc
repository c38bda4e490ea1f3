#include "worker/model/transformer.h"

#include <algorithm>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "ops/status_macros.h"
#include "worker/model/llama_forward.h"

namespace llama {
namespace {

// MemAvailable from /proc/meminfo, in bytes; 0 if unknown.
double AvailableMemoryBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  double kb = 0;
  std::string unit;
  while (meminfo >> key >> kb >> unit) {
    if (key == "MemAvailable:") return kb * 1024;
  }
  return 0;
}

}  // namespace

absl::StatusOr<Transformer::Buffers> Transformer::AllocateBuffers(const RankGeometry& g,
                                                                  const TransformerOptions& options) {
  Buffers b;
  const int64_t t = options.max_step_tokens;
  const std::vector<int64_t> cache_shape = {KvBlocksOf(options), options.kv_block_size, g.kv_width()};
  for (int64_t i = 0; i < g.config.n_layers; ++i) {
    ASSIGN_OR_RETURN(Tensor k, Tensor::Zeros(options.kv_cache_dtype, cache_shape));
    ASSIGN_OR_RETURN(Tensor v, Tensor::Zeros(options.kv_cache_dtype, cache_shape));
    b.k_cache.push_back(std::move(k));
    b.v_cache.push_back(std::move(v));
  }
  for (const auto& [buffer, width] :
       {std::pair<Tensor*, int64_t>{&b.x, g.config.dim}, {&b.xb, g.config.dim}, {&b.q, g.q_width()},
        {&b.k, g.kv_width()}, {&b.v, g.kv_width()}, {&b.attention, g.q_width()}, {&b.projection, g.config.dim},
        {&b.gate, g.local_hidden}, {&b.up, g.local_hidden},
        {&b.gathered, std::max(g.config.dim, g.config.vocab_size)}, {&b.logits_local, g.local_vocab},
        {&b.logits, g.config.vocab_size}}) {
    ASSIGN_OR_RETURN(*buffer, Tensor::Zeros(DType::kF32, {t, width}));
  }
  return b;
}

Transformer::Transformer(ModelWeights weights, RankGeometry geometry, Buffers buffers, Communicator* communicator,
                         const TransformerOptions& options)
    : weights_(std::move(weights)),
      geometry_(std::move(geometry)),
      options_(options),
      pool_(options.threads),
      buffers_(std::move(buffers)),
      activations_{buffers_.x.mutable_f32(),          buffers_.xb.mutable_f32(),
                   buffers_.q.mutable_f32(),          buffers_.k.mutable_f32(),
                   buffers_.v.mutable_f32(),          buffers_.attention.mutable_f32(),
                   buffers_.projection.mutable_f32(), buffers_.gate.mutable_f32(),
                   buffers_.up.mutable_f32(),         buffers_.logits_local.mutable_f32(),
                   buffers_.logits.mutable_f32()},
      ops_(geometry_, options.max_seq_len, communicator, pool_, buffers_.gathered.mutable_f32()) {
  for (int64_t i = 0; i < geometry_.config.n_layers; ++i) {
    caches_.push_back({buffers_.k_cache[i].mutable_raw(), buffers_.v_cache[i].mutable_raw(), options.kv_cache_dtype,
                       options.kv_block_size});
  }
}

absl::StatusOr<std::unique_ptr<Transformer>> Transformer::Create(ModelWeights weights, Communicator* communicator,
                                                                 const TransformerOptions& options) {
  ASSIGN_OR_RETURN(RankGeometry geometry,
                   CheckModel(weights, communicator->rank(), communicator->world_size(), options));
  // Everything is allocated here, once: say so plainly if it cannot fit
  // rather than die in the allocator. The weights are mapped, not copied.
  RETURN_IF_ERROR(CheckMemory(geometry, options, /*weight_bytes=*/0, AvailableMemoryBytes(), "this machine"));
  absl::StatusOr<Buffers> buffers = AllocateBuffers(geometry, options);
  if (!buffers.ok()) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "the KV cache (%.2f GB) and work buffers (%.2f GB) do not fit: %s; lower --kv_cache_gb (or --max_batch_size "
        "and --max_seq_len, which size it by default)",
        geometry.KvCacheBytes(KvBlocksOf(options) * options.kv_block_size, options.kv_cache_dtype) / 1e9,
        geometry.WorkBytes(options.max_step_tokens) / 1e9, buffers.status().message()));
  }
  return std::unique_ptr<Transformer>(
      new Transformer(std::move(weights), std::move(geometry), *std::move(buffers), communicator, options));
}

absl::StatusOr<absl::Span<const float>> Transformer::Forward(absl::Span<const SequenceChunk> chunks) {
  RETURN_IF_ERROR(PlanStep(chunks, StepLimitsOf(options_, config().vocab_size), plan_));
  RETURN_IF_ERROR(LlamaForward(ops_, geometry_, weights_, plan_, caches_, activations_));
  return absl::Span<const float>(buffers_.logits.f32(), plan_.rows() * config().vocab_size);
}

}  // namespace llama
