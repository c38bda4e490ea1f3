// CUDA twins of the CPU kernels in ops/cpu/, with the same contracts (see
// there), on device pointers. Host-only header: callers need not be nvcc.
// Every launcher enqueues on `stream` and returns the launch's status with
// the kernel named; weights may be f32, f16 or bf16 (upcast on load), and
// activations are f32.

#ifndef LLAMA_OPS_CUDA_KERNELS_H_
#define LLAMA_OPS_CUDA_KERNELS_H_

#include <cstdint>

#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "ops/dtype.h"
#include "ops/kv_cache_view.h"

namespace llama::cuda {

// out[i, :] = table[tokens[i], :], table [vocab, width].
absl::Status EmbeddingLookup(const int32_t* tokens, int64_t n, const void* table, DType dtype, int64_t width,
                             float* out, cudaStream_t stream);

// out = x * rsqrt(mean(x^2) + eps) * weight per row of x [n, dim]; out may alias x.
absl::Status RmsNorm(const float* x, const void* weight, DType dtype, int64_t n, int64_t dim, float eps, float* out,
                     cudaStream_t stream);

// Rotates row r of x ([rows, heads, head_dim], Meta's interleaved pairs) for
// position positions[r]; cos/sin are [max_positions, head_dim / 2] tables.
absl::Status Rope(float* x, int64_t rows, int64_t heads, int64_t head_dim, const int32_t* positions, const float* cos,
                  const float* sin, cudaStream_t stream);

// gate = silu(gate) * up.
absl::Status SwiGlu(float* gate, const float* up, int64_t count, cudaStream_t stream);

// x += y.
absl::Status AddInPlace(float* x, const float* y, int64_t count, cudaStream_t stream);

// f32 -> bf16 or f16 (round to nearest even), for GEMM inputs.
absl::Status CastFromF32(const float* in, void* out, DType to, int64_t count, cudaStream_t stream);

// A step's rows live in the KV cache at (slots[r], positions[r]): device
// arrays, so a captured CUDA graph replays with new values.
using KvCacheView = ::llama::KvCacheView;

// Writes rows of k and v ([n, kv_width], f32) into the cache at each row's
// slot and position, rounding to the cache's type.
absl::Status StoreKv(const float* k, const float* v, int64_t n, int64_t kv_width, const int32_t* slots,
                     const int32_t* positions, const KvCacheView& cache, cudaStream_t stream);

// Causal attention of n rows: row r (q [n, n_heads, head_dim]) attends over
// positions [0, positions[r]] of slot slots[r], which must already be in the
// cache (StoreKv first). One kernel for prefill and decode, and for steps
// mixing both. kv_head_of [n_heads] (device); out [n, n_heads * head_dim].
absl::Status Attention(const float* q, int64_t n, const int32_t* slots, const int32_t* positions,
                       const KvCacheView& cache, const int32_t* kv_head_of, int64_t n_heads, int64_t n_kv_heads,
                       int64_t head_dim, float* out, cudaStream_t stream);

// The same attention for prefill, a tile at a time: tile i is rows
// [tile_first[i], tile_first[i] + tile_rows[i]) of the step (at most
// kAttentionTileRows, all of one slot). A block stages the tile's queries
// and blocks of 32 keys and values in shared memory and keeps a running
// (online) softmax per row, so each cached key is read once per tile rather
// than once per row. head_dim <= 128 (Llama 2's is 128).
inline constexpr int kAttentionTileRows = 16;
absl::Status AttentionTiles(const float* q, const int32_t* tile_first, const int32_t* tile_rows, int64_t tiles,
                            const int32_t* slots, const int32_t* positions, const KvCacheView& cache,
                            const int32_t* kv_head_of, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                            float* out, cudaStream_t stream);

// out[i, :] = x[rows[i], :] for i < count; x and out [*, width].
absl::Status GatherRows(const float* x, const int32_t* rows, int64_t count, int64_t width, float* out,
                        cudaStream_t stream);

// flags[index] |= 1 if any of x[0, count) is NaN or infinite (no host sync:
// the caller reads the flags once per step).
absl::Status FlagNonFinite(const float* x, int64_t count, int32_t* flags, int index, cudaStream_t stream);

// How one row picks its token (worker/model/language_model.h's TokenChoice).
struct RowSampling {
  float temperature;  // 0: argmax, the first maximum on ties.
  float top_p;
  double uniform;  // In [0, 1).
};

// tokens[r] = the token cpu::TopPSampler::Sample (or cpu::Argmax at
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

#endif  // LLAMA_OPS_CUDA_KERNELS_H_
