// LayerOps on the CPU: the kernels of ops/cpu/ on host buffers, over this
// rank's thread pool, and the collectives of a Communicator (local or TCP).
// Every op completes before it returns.

#ifndef LLAMA_WORKER_MODEL_CPU_LAYER_OPS_H_
#define LLAMA_WORKER_MODEL_CPU_LAYER_OPS_H_

#include <vector>

#include "checkpoint/rank_geometry.h"
#include "ops/cpu/linear.h"
#include "ops/cpu/thread_pool.h"
#include "ops/rope_table.h"
#include "worker/collectives/communicator.h"
#include "worker/model/layer_ops.h"
#include "worker/model/rank_plan.h"

namespace llama {

class CpuLayerOps final : public LayerOps {
 public:
  // `gathered` is the plan's Activations::gathered; all arguments must
  // outlive the ops.
  CpuLayerOps(const RankPlan& plan, Communicator* communicator, ThreadPool& pool, float* gathered);

  absl::Status EmbeddingLookup(const StepPlan& plan, const Tensor& table, float* out) override;
  absl::Status RmsNorm(const float* x, const Tensor& weight, int64_t n, float* out) override;
  absl::Status Linear(const float* x, int64_t n, const Tensor& weight, float* y) override;
  absl::Status Linears(const float* x, int64_t n, absl::Span<const LinearTarget> targets) override;
  absl::Status Rope(const StepPlan& plan, float* x, int64_t heads) override;
  absl::Status StoreKv(const StepPlan& plan, const float* k, const float* v, const KvCacheView& cache) override;
  absl::Status Attention(const StepPlan& plan, const float* q, const KvCacheView& cache, float* out) override;
  absl::Status SwiGlu(float* gate, const float* up, int64_t count) override;
  absl::Status AddInPlace(float* x, const float* y, int64_t count) override;
  absl::Status AllReduceSum(float* x, int64_t rows, int64_t width) override;
  absl::Status GatherColumns(const float* local, int64_t n, int64_t width, float* full) override;
  absl::Status GatherLogitRows(const StepPlan& plan, const float* x, int64_t width, float* out) override;
  absl::Status CheckFinite(const float* x, int64_t count, int index) override;

 private:
  const RankGeometry& geometry_;
  Communicator* communicator_;
  ThreadPool& pool_;
  float* gathered_;
  cpu::LinearOptions linear_options_;
  RopeTable rope_;
  std::vector<int> kv_head_of_;
};

}  // namespace llama

#endif  // LLAMA_WORKER_MODEL_CPU_LAYER_OPS_H_
