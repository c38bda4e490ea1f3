#include "worker/engine/step_codec.h"

#include <cstring>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace llama {
namespace {

template <typename T>
void Put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

template <typename T>
void PutAll(std::string& out, absl::Span<const T> values) {
  out.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

// Reads a message front to back; every read says what it was reading.
class Reader {
 public:
  explicit Reader(const std::string& message) : message_(message) {}

  template <typename T>
  absl::Status Get(T& value, const char* what) {
    return GetAll(absl::MakeSpan(&value, 1), what);
  }
  template <typename T>
  absl::Status GetAll(absl::Span<T> values, const char* what) {
    const size_t bytes = values.size() * sizeof(T);
    if (message_.size() - offset_ < bytes) {
      return absl::DataLossError(absl::StrFormat("step message from rank 0: %s (%d bytes at byte %d) runs past its "
                                                 "%d bytes",
                                                 what, bytes, offset_, message_.size()));
    }
    std::memcpy(values.data(), message_.data() + offset_, bytes);
    offset_ += bytes;
    return absl::OkStatus();
  }
  bool done() const { return offset_ == message_.size(); }

 private:
  const std::string& message_;
  size_t offset_ = 0;
};

}  // namespace

EncodedStepHeader EncodeStepHeader(StepHeader header) {
  return {kStepCodecTag << 32 | kStepCodecVersion, static_cast<int64_t>(header.kind), header.bytes};
}

absl::StatusOr<StepHeader> DecodeStepHeader(const EncodedStepHeader& encoded) {
  const int64_t tag = encoded[0] >> 32, version = encoded[0] & 0xFFFFFFFF;
  if (tag != kStepCodecTag || version != kStepCodecVersion) {
    return absl::DataLossError(absl::StrFormat(
        "step header from rank 0: lockstep version %d (tag %#x), this rank speaks version %d: every rank of a "
        "job must run the same worker build",
        version, tag, kStepCodecVersion));
  }
  const int64_t kind = encoded[1], bytes = encoded[2];
  if (kind < static_cast<int64_t>(StepKind::kForward) || kind > static_cast<int64_t>(StepKind::kStop)) {
    return absl::DataLossError(absl::StrFormat("step header from rank 0: unknown kind %d", kind));
  }
  if (bytes < 0 || bytes > kMaxStepMessageBytes) {
    return absl::DataLossError(
        absl::StrFormat("step header from rank 0: %d bytes (at most %d)", bytes, kMaxStepMessageBytes));
  }
  return StepHeader{static_cast<StepKind>(kind), bytes};
}

std::string EncodeStep(absl::Span<const SequenceChunk> chunks, absl::Span<const TokenChoice> choices) {
  std::string out;
  Put<int64_t>(out, static_cast<int64_t>(chunks.size()));
  for (const SequenceChunk& c : chunks) {
    Put<int64_t>(out, c.start_pos);
    Put<int64_t>(out, static_cast<int64_t>(c.tokens.size()));
    Put<int64_t>(out, static_cast<int64_t>(c.blocks.size()));
    Put<uint8_t>(out, c.all_logits ? 1 : 0);
    Put<int64_t>(out, c.proposed);
    PutAll<int>(out, c.tokens);
    PutAll<int32_t>(out, c.blocks);
  }
  for (const TokenChoice& choice : choices) {
    Put<TokenSampling>(out, choice.sampling);
    Put<double>(out, choice.uniform);
    Put<int32_t>(out, choice.top_logprobs);
    Put<int64_t>(out, static_cast<int64_t>(choice.adjustments.size()));
    PutAll<LogitAdjustment>(out, choice.adjustments);
    Put<uint8_t>(out, choice.allowed != nullptr ? 1 : 0);
  }
  return out;
}

absl::Status DecodeStep(const std::string& message, bool with_choices, DecodedStep& step) {
  Reader in(message);
  int64_t count = 0;
  RETURN_IF_ERROR(in.Get(count, "the chunk count"));
  // Each chunk takes at least 33 bytes: a count past that is a bad message.
  if (count < 0 || count > static_cast<int64_t>(message.size()) / 33) {
    return absl::DataLossError(absl::StrFormat("step message from rank 0: %d chunks in %d bytes", count,
                                               message.size()));
  }
  step.tokens.assign(count, {});
  step.blocks.assign(count, {});
  step.chunks.assign(count, {});
  int64_t choice_rows = 0;
  for (int64_t c = 0; c < count; ++c) {
    int64_t start = 0, tokens = 0, blocks = 0, proposed = 0;
    uint8_t all_logits = 0;
    RETURN_IF_ERROR(in.Get(start, "a chunk's start position"));
    RETURN_IF_ERROR(in.Get(tokens, "a chunk's token count"));
    RETURN_IF_ERROR(in.Get(blocks, "a chunk's block count"));
    RETURN_IF_ERROR(in.Get(all_logits, "a chunk's all_logits"));
    RETURN_IF_ERROR(in.Get(proposed, "a chunk's proposed token count"));
    const int64_t limit = static_cast<int64_t>(message.size());
    if (tokens < 0 || blocks < 0 || tokens > limit || blocks > limit) {
      return absl::DataLossError(
          absl::StrFormat("step message from rank 0: chunk %d has %d tokens and %d blocks", c, tokens, blocks));
    }
    if (proposed < 0 || (proposed > 0 && proposed >= tokens)) {
      return absl::DataLossError(absl::StrFormat(
          "step message from rank 0: chunk %d has %d proposed tokens of %d", c, proposed, tokens));
    }
    choice_rows += proposed + 1;
    step.tokens[c].resize(tokens);
    step.blocks[c].resize(blocks);
    RETURN_IF_ERROR(in.GetAll(absl::MakeSpan(step.tokens[c]), "a chunk's tokens"));
    RETURN_IF_ERROR(in.GetAll(absl::MakeSpan(step.blocks[c]), "a chunk's block table"));
    step.chunks[c] = {step.blocks[c], start, step.tokens[c], all_logits != 0, proposed};
  }
  step.choices.assign(with_choices ? choice_rows : 0, {});
  step.adjustments.assign(step.choices.size(), {});
  step.masked.assign(step.choices.size(), false);
  for (size_t c = 0; c < step.choices.size(); ++c) {
    TokenChoice& choice = step.choices[c];
    RETURN_IF_ERROR(in.Get(choice.sampling, "a token choice's sampling parameters"));
    RETURN_IF_ERROR(in.Get(choice.uniform, "a token choice's random number"));
    int32_t top = 0;
    RETURN_IF_ERROR(in.Get(top, "a token choice's top_logprobs"));
    choice.top_logprobs = top;
    int64_t adjustments = 0;
    RETURN_IF_ERROR(in.Get(adjustments, "a token choice's adjustment count"));
    if (adjustments < 0 || adjustments > static_cast<int64_t>(message.size())) {
      return absl::DataLossError(
          absl::StrFormat("step message from rank 0: choice %d has %d logit adjustments", c, adjustments));
    }
    step.adjustments[c].resize(adjustments);
    RETURN_IF_ERROR(in.GetAll(absl::MakeSpan(step.adjustments[c]), "a token choice's logit adjustments"));
    choice.adjustments = step.adjustments[c];
    uint8_t masked = 0;
    RETURN_IF_ERROR(in.Get(masked, "a token choice's mask flag"));
    step.masked[c] = masked != 0;
  }
  if (!in.done()) return absl::DataLossError("step message from rank 0: bytes left over after the last field");
  return absl::OkStatus();
}

}  // namespace llama
