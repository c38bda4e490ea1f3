#include "worker/engine/lockstep.h"

#include "base/status_macros.h"

namespace llama {

absl::Status LeaderModel::Send(StepKind kind, const std::string& message) {
  EncodedStepHeader header = EncodeStepHeader({kind, static_cast<int64_t>(message.size())});
  RETURN_IF_ERROR(communicator_->Broadcast(header.data(), sizeof(header), 0));
  if (message.empty()) return absl::OkStatus();
  return communicator_->Broadcast(const_cast<char*>(message.data()), message.size(), 0);
}

absl::StatusOr<absl::Span<const float>> LeaderModel::Forward(absl::Span<const SequenceChunk> chunks) {
  if (communicator_->world_size() > 1) RETURN_IF_ERROR(Send(StepKind::kForward, EncodeStep(chunks, {})));
  return model_->Forward(chunks);
}

absl::Status LeaderModel::ForwardAndChoose(absl::Span<const SequenceChunk> chunks,
                                           absl::Span<const TokenChoice> choices, absl::Span<ChosenToken> chosen) {
  if (communicator_->world_size() > 1) RETURN_IF_ERROR(Send(StepKind::kForwardAndChoose, EncodeStep(chunks, choices)));
  return model_->ForwardAndChoose(chunks, choices, chosen);
}

absl::Status LeaderModel::Heartbeat() {
  if (communicator_->world_size() == 1) return absl::OkStatus();
  return Send(StepKind::kHeartbeat, "");
}

absl::Status LeaderModel::Stop() {
  if (communicator_->world_size() == 1) return absl::OkStatus();
  return Send(StepKind::kStop, "");
}

absl::Status FollowLeader(LanguageModel& model, Communicator& communicator) {
  std::string message;
  DecodedStep step;
  std::vector<ChosenToken> chosen;
  std::vector<uint64_t> all_allowed;
  while (true) {
    EncodedStepHeader encoded{};
    RETURN_IF_ERROR(communicator.Broadcast(encoded.data(), sizeof(encoded), 0));
    ASSIGN_OR_RETURN(const StepHeader header, DecodeStepHeader(encoded));
    message.resize(header.bytes);
    if (header.bytes > 0) RETURN_IF_ERROR(communicator.Broadcast(message.data(), message.size(), 0));
    switch (header.kind) {
      case StepKind::kStop:
        return absl::OkStatus();
      case StepKind::kHeartbeat:
        break;
      case StepKind::kForward:
        RETURN_IF_ERROR(DecodeStep(message, /*with_choices=*/false, step));
        RETURN_IF_ERROR(model.Forward(step.chunks).status());
        break;
      case StepKind::kForwardAndChoose:
        RETURN_IF_ERROR(DecodeStep(message, /*with_choices=*/true, step));
        // Rank 0's masks stay with its sampler; a mask that allows every
        // token takes this rank down the same (host sampling) path.
        for (size_t c = 0; c < step.choices.size(); ++c) {
          if (!step.masked[c]) continue;
          all_allowed.resize((model.limits().vocab_size + 63) / 64, ~uint64_t{0});
          step.choices[c].allowed = all_allowed.data();
        }
        chosen.resize(step.choices.size());
        RETURN_IF_ERROR(model.ForwardAndChoose(step.chunks, step.choices, absl::MakeSpan(chosen)));
        break;
    }
  }
}

}  // namespace llama
