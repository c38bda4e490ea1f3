// CUDA twin of ops/cpu/attention.h, with the same contracts, on device pointers.
// Host-only header: callers need not be nvcc. Every launcher enqueues on
// `stream` and returns the launch's status with the kernel named.
// The cache is f32, bf16 or f16; math is f32.

#ifndef LLAMA_OPS_CUDA_ATTENTION_H_
#define LLAMA_OPS_CUDA_ATTENTION_H_

#include <cstdint>

#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "ops/kv_cache_view.h"

namespace llama::cuda {

// A step's row r is position positions[r] of the sequence whose block table
// `tables` gives (ops/kv_cache_view.h): device arrays, so a captured CUDA
// graph replays with new values.
using KvCacheView = ::llama::KvCacheView;
using KvBlockTables = ::llama::KvBlockTables;

// Writes rows of k and v ([n, kv_width], f32) into the paged cache at each
// row's position, rounding to the cache's type.
absl::Status StoreKv(const float* k, const float* v, int64_t n, int64_t kv_width, KvBlockTables tables,
                     const int32_t* positions, const KvCacheView& cache, cudaStream_t stream);

// Causal attention of n rows: row r (q [n, n_heads, head_dim]) attends over
// positions [0, positions[r]] of its sequence, which must already be in the
// cache (StoreKv first). One kernel for prefill and decode, and for steps
// mixing both. kv_head_of [n_heads] (device); out [n, n_heads * head_dim].
absl::Status Attention(const float* q, int64_t n, KvBlockTables tables, const int32_t* positions,
                       const KvCacheView& cache, const int32_t* kv_head_of, int64_t n_heads, int64_t n_kv_heads,
                       int64_t head_dim, float* out, cudaStream_t stream);

// The same attention for prefill, a tile at a time: tile i is rows
// [tile_first[i], tile_first[i] + tile_rows[i]) of the step (at most
// kAttentionTileRows, all of one sequence). Keys and values are staged in
// shared memory a block at a time and each row keeps a running (online)
// softmax, so each cached key is read once per tile rather than once per
// row. Head sizes 64 and 128 run on tensor cores (attention_mma.h); others up
// to 128 on CUDA cores, in f32, 16 rows a block.
inline constexpr int kAttentionTileRows = 64;
absl::Status AttentionTiles(const float* q, const int32_t* tile_first, const int32_t* tile_rows, int64_t tiles,
                            KvBlockTables tables, const int32_t* positions, const KvCacheView& cache,
                            const int32_t* kv_head_of, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                            float* out, cudaStream_t stream);

// Decode attention split over the context (flash-decoding): one block per
// (row, head, split of split_positions cached positions) keeps an online
// softmax over its split, and a second kernel combines the splits' partial
// sums. A decode step at batch 1 then has n_heads * splits blocks in flight
// instead of n_heads, each reading a short stretch of the cache: the row-by-
// row kernel leaves most of the GPU idle and is latency-bound once the
// context grows. The grid depends only on max_positions (the cache's
// capacity), so a captured graph replays for any position. head_dim <= 128.
// scratch: DecodeAttentionScratchFloats(n, ...) floats on the device.
int64_t DecodeSplitPositions(int64_t max_positions);
int64_t DecodeAttentionScratchFloats(int64_t n, int64_t n_heads, int64_t head_dim, int64_t max_positions);
absl::Status DecodeAttention(const float* q, int64_t n, KvBlockTables tables, const int32_t* positions,
                             const KvCacheView& cache, const int32_t* kv_head_of, int64_t n_heads, int64_t n_kv_heads,
                             int64_t head_dim, int64_t max_positions, float* scratch, float* out,
                             cudaStream_t stream);

}  // namespace llama::cuda

#endif  // LLAMA_OPS_CUDA_ATTENTION_H_
