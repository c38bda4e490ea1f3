// Tensor-parallel ranks in lockstep: rank 0 runs the engine (the scheduler,
// sampling, the requests) and every other rank runs exactly the model calls
// rank 0 makes, with the same chunks, block tables and sampling choices, so
// that their collectives pair up. As vLLM broadcasts each scheduler step to
// its workers and TGI sends each shard the same call. Rank 0's chosen
// tokens are the ones that count; the others' are discarded.
//
// A call travels over the job's host collective (the TCP ring, on GPUs
// too) as a header and a message (worker/engine/step_codec.h). A rank that dies or
// freezes fails the next collective within its deadline on every rank, so
// the engine ends every request with the error and the followers return it.

#ifndef LLAMA_WORKER_ENGINE_LOCKSTEP_H_
#define LLAMA_WORKER_ENGINE_LOCKSTEP_H_

#include <string>

#include "absl/status/statusor.h"
#include "worker/collectives/communicator.h"
#include "worker/engine/step_codec.h"
#include "worker/model/language_model.h"

namespace llama {

// Rank 0's model: each call is sent to the other ranks, then run here.
class LeaderModel final : public LanguageModel {
 public:
  // Both must outlive this; `communicator` is the host collective.
  LeaderModel(LanguageModel* model, Communicator* communicator) : model_(model), communicator_(communicator) {}

  const ModelLimits& limits() const override { return model_->limits(); }

  absl::StatusOr<absl::Span<const float>> Forward(absl::Span<const SequenceChunk> chunks) override;
  absl::Status ForwardAndChoose(absl::Span<const SequenceChunk> chunks, absl::Span<const TokenChoice> choices,
                                absl::Span<ChosenToken> chosen) override;

  // Keeps followers that wait for the next step inside their deadline
  // while rank 0 has no work (a server between requests).
  absl::Status Heartbeat();
  // Tells the followers that the job is over: FollowLeader returns OK.
  absl::Status Stop();

 private:
  absl::Status Send(StepKind kind, const std::string& message);

  LanguageModel* model_;
  Communicator* communicator_;
  std::string message_;
};

// Every rank but 0: runs the calls rank 0 sends on `model` until it says
// stop (OK) or a call or the collective fails (that error).
absl::Status FollowLeader(LanguageModel& model, Communicator& communicator);

}  // namespace llama

#endif  // LLAMA_WORKER_ENGINE_LOCKSTEP_H_
