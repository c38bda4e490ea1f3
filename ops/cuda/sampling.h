// CUDA twin of worker/sampling/sampler.h, with the same contracts, on device pointers.
// Host-only header: callers need not be nvcc. Every launcher enqueues on
// `stream` and returns the launch's status with the kernel named.

#ifndef LLAMA_OPS_CUDA_SAMPLING_H_
#define LLAMA_OPS_CUDA_SAMPLING_H_

#include <cstdint>

#include <cuda_runtime.h>

#include "absl/status/status.h"

namespace llama::cuda {

// How one row picks its token (worker/model/language_model.h's TokenChoice).
struct RowSampling {
  float temperature;  // 0: argmax, the first maximum on ties.
  float top_p;
  double uniform;  // In [0, 1).
};

// tokens[r] = the token TopPSampler::Sample (or Argmax at
// temperature 0) picks from row r of logits [rows, vocab] with params[r],
// without sorting: a binary search over the probability threshold finds the
// nucleus, a prefix sum in token-id order finds the draw. logprobs[r] =
// log_softmax(row r)[tokens[r]]. probs: scratch [rows, vocab]. The CPU
// computes probabilities in double, the GPU in float: a draw within
// rounding of a boundary may pick a neighbour. A row with a NaN or infinite
// logit gets a token inside the row (its largest comparable logit); flag
// such rows with FlagNonFinite, the choice means nothing.
absl::Status SampleRows(const float* logits, int64_t rows, int64_t vocab, const RowSampling* params, float* probs,
                        int32_t* tokens, float* logprobs, cudaStream_t stream);

}  // namespace llama::cuda

#endif  // LLAMA_OPS_CUDA_SAMPLING_H_
