#include "worker/model/transformer.h"

#include <algorithm>
#include <fstream>
#include <new>
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

Tensor Buffer(int64_t rows, int64_t width) { return Tensor::Zeros(DType::kF32, {rows, width}); }

}  // namespace

Transformer::Transformer(ModelWeights weights, RankGeometry geometry, Communicator* communicator,
                         const TransformerOptions& options)
    : weights_(std::move(weights)),
      geometry_(std::move(geometry)),
      options_(options),
      pool_(options.threads),
      x_(Buffer(options.max_step_tokens, geometry_.config.dim)),
      xb_(Buffer(options.max_step_tokens, geometry_.config.dim)),
      q_(Buffer(options.max_step_tokens, geometry_.q_width())),
      k_(Buffer(options.max_step_tokens, geometry_.kv_width())),
      v_(Buffer(options.max_step_tokens, geometry_.kv_width())),
      attention_(Buffer(options.max_step_tokens, geometry_.q_width())),
      projection_(Buffer(options.max_step_tokens, geometry_.config.dim)),
      gate_(Buffer(options.max_step_tokens, geometry_.local_hidden)),
      up_(Buffer(options.max_step_tokens, geometry_.local_hidden)),
      gathered_(Buffer(options.max_step_tokens, std::max(geometry_.config.dim, geometry_.config.vocab_size))),
      logits_local_(Buffer(options.max_step_tokens, geometry_.local_vocab)),
      logits_(Buffer(options.max_step_tokens, geometry_.config.vocab_size)),
      activations_{x_.mutable_f32(),          xb_.mutable_f32(),        q_.mutable_f32(),
                   k_.mutable_f32(),          v_.mutable_f32(),         attention_.mutable_f32(),
                   projection_.mutable_f32(), gate_.mutable_f32(),      up_.mutable_f32(),
                   logits_local_.mutable_f32(), logits_.mutable_f32()},
      ops_(geometry_, options.max_seq_len, communicator, pool_, gathered_.mutable_f32()) {
  const std::vector<int64_t> cache_shape = {options.max_batch_size, options.max_seq_len, geometry_.kv_width()};
  for (int64_t i = 0; i < geometry_.config.n_layers; ++i) {
    k_cache_.push_back(Tensor::Zeros(options.kv_cache_dtype, cache_shape));
    v_cache_.push_back(Tensor::Zeros(options.kv_cache_dtype, cache_shape));
    caches_.push_back({k_cache_.back().mutable_raw(), v_cache_.back().mutable_raw(), options.kv_cache_dtype,
                       options.max_seq_len * geometry_.kv_width()});
  }
}

absl::StatusOr<std::unique_ptr<Transformer>> Transformer::Create(ModelWeights weights, Communicator* communicator,
                                                                 const TransformerOptions& options) {
  ASSIGN_OR_RETURN(RankGeometry geometry,
                   CheckModel(weights, communicator->rank(), communicator->world_size(), options));
  // Everything is allocated here, once: say so plainly if it cannot fit
  // rather than die in the allocator. The weights are mapped, not copied.
  RETURN_IF_ERROR(CheckMemory(geometry, options, /*weight_bytes=*/0, AvailableMemoryBytes(), "this machine"));
  try {
    return std::unique_ptr<Transformer>(new Transformer(std::move(weights), geometry, communicator, options));
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "out of memory allocating the KV cache (%.2f GB) and work buffers (%.2f GB); lower --max_batch_size or "
        "--max_seq_len",
        geometry.KvCacheBytes(options.max_batch_size, options.max_seq_len, options.kv_cache_dtype) / 1e9,
        geometry.WorkBytes(options.max_step_tokens) / 1e9));
  }
}

absl::StatusOr<absl::Span<const float>> Transformer::Forward(absl::Span<const SequenceChunk> chunks) {
  RETURN_IF_ERROR(PlanStep(chunks, StepLimitsOf(options_, config().vocab_size), plan_));
  RETURN_IF_ERROR(LlamaForward(ops_, geometry_, weights_, plan_, caches_, activations_));
  return absl::Span<const float>(logits_.f32(), plan_.rows() * config().vocab_size);
}

}  // namespace llama
