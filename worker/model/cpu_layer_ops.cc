#include "worker/model/cpu_layer_ops.h"

#include <cstring>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "ops/cast.h"
#include "ops/cpu/attention.h"
#include "ops/cpu/elementwise.h"
#include "ops/cpu/linear.h"

namespace llama {

CpuLayerOps::CpuLayerOps(const RankPlan& plan, Communicator* communicator, ThreadPool& pool, float* gathered)
    : geometry_(plan.geometry),
      communicator_(communicator),
      pool_(pool),
      gathered_(gathered),
      linear_options_{plan.int8_prefill, plan.bf16_activations},
      rope_(RopeTableOf(plan)),
      kv_head_of_(geometry_.kv_head_of.begin(), geometry_.kv_head_of.end()) {}

absl::Status CpuLayerOps::EmbeddingLookup(const StepPlan& plan, const Tensor& table, float* out) {
  cpu::EmbeddingLookup(table, plan.tokens, out);
  return absl::OkStatus();
}

absl::Status CpuLayerOps::RmsNorm(const float* x, const Tensor& weight, int64_t n, float* out) {
  cpu::RmsNorm(x, weight, n, geometry_.config.dim, static_cast<float>(geometry_.config.norm_eps), out);
  return absl::OkStatus();
}

absl::Status CpuLayerOps::Linear(const float* x, int64_t n, const Tensor& weight, float* y) {
  return cpu::Linear(x, n, weight, y, pool_, linear_options_);
}

absl::Status CpuLayerOps::Linears(const float* x, int64_t n, absl::Span<const LinearTarget> targets) {
  absl::InlinedVector<cpu::LinearOutput, 4> outputs;
  for (const LinearTarget& t : targets) outputs.push_back({t.weight, t.y});
  return cpu::Linears(x, n, outputs, pool_, linear_options_);
}

absl::Status CpuLayerOps::Rope(const StepPlan& plan, float* x, int64_t heads) {
  const int64_t width = heads * geometry_.head_dim;
  for (int64_t r = 0; r < plan.n(); ++r) rope_.Apply(x + r * width, heads, plan.positions[r]);
  return absl::OkStatus();
}

absl::Status CpuLayerOps::StoreKv(const StepPlan& plan, const float* k, const float* v, const KvCacheView& cache) {
  const int64_t width = geometry_.kv_width();
  const size_t element = DTypeSize(cache.dtype);
  for (int64_t r = 0; r < plan.n(); ++r) {
    const size_t offset = CacheRowOf(plan.table(plan.table_of[r]), cache.block_size, plan.positions[r]) * width * element;
    RETURN_IF_ERROR(CastElements(k + r * width, DType::kF32, static_cast<char*>(cache.k) + offset, cache.dtype, width));
    RETURN_IF_ERROR(CastElements(v + r * width, DType::kF32, static_cast<char*>(cache.v) + offset, cache.dtype, width));
  }
  return absl::OkStatus();
}

absl::Status CpuLayerOps::Attention(const StepPlan& plan, const float* q, const KvCacheView& cache, float* out) {
  const int64_t q_width = geometry_.q_width();
  for (size_t c = 0; c < plan.chunks.size(); ++c) {
    const PlannedChunk& chunk = plan.chunks[c];
    cpu::Attention({q + chunk.first_row * q_width, cache.k, cache.v, cache.dtype, plan.table(c), cache.block_size,
                    kv_head_of_.data(), chunk.start_pos, chunk.len, geometry_.local_heads, geometry_.local_kv_heads,
                    geometry_.head_dim, out + chunk.first_row * q_width},
                   pool_);
  }
  return absl::OkStatus();
}

absl::Status CpuLayerOps::SwiGlu(float* gate, const float* up, int64_t count) {
  cpu::SwiGlu(gate, up, count);
  return absl::OkStatus();
}

absl::Status CpuLayerOps::AddInPlace(float* x, const float* y, int64_t count) {
  cpu::AddInPlace(x, y, count);
  return absl::OkStatus();
}

absl::Status CpuLayerOps::AllReduceSum(float* x, int64_t rows, int64_t width) {
  return communicator_->AllReduceSumRows(x, rows, width);
}

absl::Status CpuLayerOps::GatherColumns(const float* local, int64_t n, int64_t width, float* full) {
  const int ws = geometry_.world_size;
  if (ws == 1) {
    if (full != local) std::memcpy(full, local, n * width * sizeof(float));
    return absl::OkStatus();
  }
  // AllGather gives [ws][n][width]; rows want [n][ws * width].
  RETURN_IF_ERROR(communicator_->AllGather(local, n * width, gathered_));
  for (int r = 0; r < ws; ++r) {
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(full + i * ws * width + r * width, gathered_ + (r * n + i) * width, width * sizeof(float));
    }
  }
  return absl::OkStatus();
}

absl::Status CpuLayerOps::GatherLogitRows(const StepPlan& plan, const float* x, int64_t width, float* out) {
  for (int64_t i = 0; i < plan.rows(); ++i) {
    std::memcpy(out + i * width, x + plan.logit_rows[i] * width, width * sizeof(float));
  }
  return absl::OkStatus();
}

absl::Status CpuLayerOps::CheckFinite(const float* x, int64_t count, int index) {
  return cpu::CheckFinite(x, count, FiniteCheckPlace(index, geometry_.config.n_layers, geometry_.rank));
}

}  // namespace llama
