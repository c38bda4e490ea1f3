// Tests' and fixtures' way to a CPU model from weights and options: the
// plan for the communicator's rank (PlanRank), then the model of that plan,
// as the worker does in two steps around its free-memory sizing.

#ifndef LLAMA_WORKER_MODEL_PLANNED_TRANSFORMER_H_
#define LLAMA_WORKER_MODEL_PLANNED_TRANSFORMER_H_

#include <memory>
#include <utility>

#include "absl/status/statusor.h"
#include "base/status_macros.h"
#include "worker/collectives/communicator.h"
#include "worker/model/model_weights.h"
#include "worker/model/rank_plan.h"
#include "worker/model/transformer.h"

namespace llama {

inline absl::StatusOr<std::unique_ptr<Transformer>> PlanAndCreateTransformer(ModelWeights weights,
                                                                           Communicator* communicator,
                                                                           const TransformerOptions& options) {
  ASSIGN_OR_RETURN(const RankPlan plan,
                   PlanRank(weights, communicator->rank(), communicator->world_size(), options));
  return Transformer::Create(std::move(weights), communicator, plan);
}

}  // namespace llama

#endif  // LLAMA_WORKER_MODEL_PLANNED_TRANSFORMER_H_
