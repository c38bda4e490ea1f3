#include "worker/model/transformer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "ops/cpu/linear.h"
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
    for (Tensor LayerWeights::*t : kLayerLinears) add(l.*t);
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
    for (Tensor LayerWeights::*t : kLayerLinears) RETURN_IF_ERROR(pack(l.*t));
  }
  return pack(w.output);
}

}  // namespace

absl::StatusOr<Transformer::Buffers> Transformer::AllocateBuffers(const RankPlan& plan) {
  Buffers b;
  const ModelLimits& l = plan.limits;
  const std::vector<int64_t> cache_shape = {l.kv_blocks, l.kv_block_size, plan.geometry.kv_width()};
  for (int64_t i = 0; i < plan.config().n_layers; ++i) {
    ASSIGN_OR_RETURN(Tensor k, Tensor::Zeros(plan.kv_cache_dtype, cache_shape));
    ASSIGN_OR_RETURN(Tensor v, Tensor::Zeros(plan.kv_cache_dtype, cache_shape));
    b.k_cache.push_back(std::move(k));
    b.v_cache.push_back(std::move(v));
  }
  for (const WorkBuffer& buffer : WorkBuffers(plan.geometry, Sampling::kOnHost)) {
    ASSIGN_OR_RETURN(Tensor t, Tensor::Zeros(DType::kF32, {l.max_step_tokens, buffer.width}));
    b.activations.*buffer.member = t.mutable_f32();
    b.work.push_back(std::move(t));
  }
  return b;
}

Transformer::Transformer(ModelWeights weights, const RankPlan& plan, Buffers buffers, Communicator* communicator)
    : weights_(std::move(weights)),
      plan_(plan),
      pool_(plan.threads),
      buffers_(std::move(buffers)),
      ops_(plan_, communicator, pool_, buffers_.activations.gathered) {
  for (int64_t i = 0; i < plan_.config().n_layers; ++i) {
    caches_.push_back({buffers_.k_cache[i].mutable_raw(), buffers_.v_cache[i].mutable_raw(), plan_.kv_cache_dtype,
                       plan_.limits.kv_block_size});
  }
}

absl::StatusOr<std::unique_ptr<Transformer>> Transformer::Create(ModelWeights weights, Communicator* communicator,
                                                                 const RankPlan& plan) {
  if (communicator->rank() != plan.geometry.rank || communicator->world_size() != plan.geometry.world_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the plan is for rank %d of %d but the communicator is rank %d of %d", plan.geometry.rank,
        plan.geometry.world_size, communicator->rank(), communicator->world_size()));
  }
  // Everything is allocated here, once: say so plainly if it cannot fit
  // rather than die in the allocator. The linear weights are packed into
  // memory of their own (the rest stay mapped).
  RETURN_IF_ERROR(CheckMemory(plan, Sampling::kOnHost, PackedWeightBytes(weights), AvailableHostMemoryBytes(),
                              "this machine"));
  {
    ThreadPool pool(plan.threads);
    RETURN_IF_ERROR(PackLinearWeights(weights, pool));
  }
  absl::StatusOr<Buffers> buffers = AllocateBuffers(plan);
  if (!buffers.ok()) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "the KV cache (%.2f GB) and work buffers (%.2f GB) do not fit: %s; lower --kv_cache_gb (or --max_batch_size "
        "and --max_seq_len, which size it by default)",
        KvCacheBytes(plan) / 1e9, WorkBytes(plan, Sampling::kOnHost) / 1e9, buffers.status().message()));
  }
  return std::unique_ptr<Transformer>(new Transformer(std::move(weights), plan, *std::move(buffers), communicator));
}

absl::StatusOr<absl::Span<const float>> Transformer::Forward(absl::Span<const SequenceChunk> chunks) {
  RETURN_IF_ERROR(PlanStep(chunks, plan_.limits, step_));
  RETURN_IF_ERROR(LlamaForward(ops_, plan_.geometry, weights_, step_, caches_, buffers_.activations));
  return absl::Span<const float>(buffers_.activations.logits, step_.rows() * config().vocab_size);
}

}  // namespace llama
