#include "worker/model/transformer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "ops/cpu/linear.h"
#include "ops/status_macros.h"
#include "worker/model/llama_forward.h"

namespace llama {
namespace {

// Drops the pages of a packed weight's source from this process (a view of
// the mapped shard: the file stays in the page cache, only the copy is
// counted against us), rounding inward so that neighbours keep theirs.
void ReleaseMappedPages(const Tensor& source) {
  if (source.mutable_raw() != nullptr) return;  // Owned: freed with its tensor.
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(source.raw()) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(source.raw()) + source.bytes()) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

// The bytes PackLinearWeights copies: every linear weight (q8_0 ones with
// their rows padded to a multiple of eight).
double PackedWeightBytes(const ModelWeights& w) {
  double bytes = 0;
  const auto add = [&](const Tensor& t) {
    const int64_t rows = t.dtype() == DType::kQ8_0 ? (t.dim(0) + 7) / 8 * 8 : t.dim(0);
    bytes += static_cast<double>(t.bytes()) / t.dim(0) * rows;
  };
  for (const LayerWeights& l : w.layers) {
    for (const Tensor* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w1, &l.w2, &l.w3}) add(*t);
  }
  add(w.output);
  return bytes;
}

// Every linear weight packed for cpu::Linear (batch-invariant kernels),
// each source released as soon as its copy is made, so that peak memory is
// the weights plus one tensor.
absl::Status PackLinearWeights(ModelWeights& w, ThreadPool& pool) {
  const auto pack = [&](Tensor& t) -> absl::Status {
    ASSIGN_OR_RETURN(Tensor packed, cpu::PackLinearWeight(t, pool));
    if (packed.raw() != t.raw()) ReleaseMappedPages(t);
    t = std::move(packed);
    return absl::OkStatus();
  };
  for (LayerWeights& l : w.layers) {
    for (Tensor* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w1, &l.w2, &l.w3}) RETURN_IF_ERROR(pack(*t));
  }
  return pack(w.output);
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
      ops_(geometry_, options.max_seq_len, communicator, pool_, buffers_.gathered.mutable_f32(),
           cpu::LinearOptions{options.int8_prefill, options.bf16_activations}) {
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
  // rather than die in the allocator. The linear weights are packed into
  // memory of their own (the rest stay mapped).
  RETURN_IF_ERROR(
      CheckMemory(geometry, options, PackedWeightBytes(weights), AvailableHostMemoryBytes(), "this machine"));
  {
    ThreadPool pool(options.threads);
    RETURN_IF_ERROR(PackLinearWeights(weights, pool));
  }
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
