// The lockstep's wire format (worker/engine/lockstep.h): how rank 0 tells
// the other tensor-parallel ranks which model call to make. One codec
// writes and reads it; a change to the layout bumps kStepCodecVersion, so
// ranks of different builds fail at their first step, naming both
// versions, instead of misreading each other.
//
// Layout, version 4 (host byte order: every rank of a job is the same
// architecture; counts are checked against the message before anything is
// allocated):
//   header   i64 tag     kStepCodecTag << 32 | version
//            i64 kind    1 Forward | 2 ForwardAndChoose | 3 Heartbeat | 4 Stop
//            i64 bytes   the message's size, 0 to kMaxStepMessageBytes
//   message  (Forward and ForwardAndChoose; broadcast after the header)
//            i64 n, then n chunks, then (ForwardAndChoose) one choice
//            per choice row: proposed + 1 per chunk, in chunk order
//   chunk    i64 start_pos, i64 token count t, i64 block count b,
//            u8 all_logits, i64 proposed (0 to t - 1), i32 tokens[t],
//            i32 block table[b]
//   choice   sampling (TokenSampling, worker/sampling/sampling_params.h,
//            as one block: f32 temperature, f32 top_p, i32 top_k,
//            f32 min_p, f32 typical_p), f64 uniform, i32 top_logprobs, i64 adjustment
//            count a, (i32 token, f32 delta)[a], u8 masked (rank 0's choice has a
//            token mask: the grammar stays with rank 0's sampler, the
//            others choose under a mask that allows every token, so they
//            take the same sampling path)

#ifndef LLAMA_WORKER_ENGINE_STEP_CODEC_H_
#define LLAMA_WORKER_ENGINE_STEP_CODEC_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "worker/model/language_model.h"

namespace llama {

inline constexpr int64_t kStepCodecTag = 0x4C4B5354;  // "LKST"
// 1: the choice's fields one by one; 2: its TokenSampling as one block;
// 3: TokenSampling with typical_p; 4: a chunk's proposed tokens
// (speculative decoding), and a choice per choice row.
inline constexpr int64_t kStepCodecVersion = 4;
// A field added to TokenSampling changes the choice's layout: bump
// kStepCodecVersion, and update the layout above and this size.
static_assert(sizeof(TokenSampling) == 20, "TokenSampling changed: bump kStepCodecVersion and document the layout");
// Most bytes one step's message may have: what a follower allocates before
// it has checked anything else (a step of a million tokens is ~8 MB).
inline constexpr int64_t kMaxStepMessageBytes = int64_t{1} << 30;

enum class StepKind : int64_t { kForward = 1, kForwardAndChoose = 2, kHeartbeat = 3, kStop = 4 };

struct StepHeader {
  StepKind kind = StepKind::kStop;
  int64_t bytes = 0;
};
using EncodedStepHeader = std::array<int64_t, 3>;

EncodedStepHeader EncodeStepHeader(StepHeader header);
// Another version, an unknown kind or a size out of range is DataLoss
// naming it.
absl::StatusOr<StepHeader> DecodeStepHeader(const EncodedStepHeader& encoded);

// Chunks, and choices (one per choice row) for ForwardAndChoose, to a message.
std::string EncodeStep(absl::Span<const SequenceChunk> chunks, absl::Span<const TokenChoice> choices);

// A message read back: chunks and choices that view the vectors beside
// them. Decoding checks every count against the message and names what
// does not fit.
struct DecodedStep {
  std::vector<std::vector<int>> tokens;
  std::vector<std::vector<int32_t>> blocks;
  std::vector<SequenceChunk> chunks;  // Views of tokens and blocks.
  std::vector<std::vector<LogitAdjustment>> adjustments;
  std::vector<TokenChoice> choices;  // Views of adjustments; `allowed` unset.
  std::vector<bool> masked;          // Rank 0's choice c had a token mask.
};
absl::Status DecodeStep(const std::string& message, bool with_choices, DecodedStep& step);

}  // namespace llama

#endif  // LLAMA_WORKER_ENGINE_STEP_CODEC_H_
