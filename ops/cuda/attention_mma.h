// Prefill attention on tensor cores, behind cuda::AttentionTiles (same
// arguments and contract, ops/cuda/attention.h). Package-private.

#ifndef LLAMA_OPS_CUDA_ATTENTION_MMA_H_
#define LLAMA_OPS_CUDA_ATTENTION_MMA_H_

#include <cstdint>

#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "ops/kv_cache_view.h"

namespace llama::cuda {

// The head sizes the tensor-core kernel is built for (Llama's 128; Llama
// 3.2 1B's 64).
bool TensorCoreAttentionFits(int64_t head_dim);

// Causal attention of tiles of up to 64 rows (kAttentionTileRows), a block
// per (tile, head), four warps of 16 rows. Both products (q k^T, then p v)
// run as bf16 mma.sync with f32 accumulation; every f32 operand is split
// into a bf16 high part and a bf16 remainder, and the product taken as
// hi*hi + hi*lo + lo*hi ("bf16x3"), which keeps about 16 bits of each
// operand: the result stays within the f32 kernels' parity tolerance of the
// CPU, whatever the cache's dtype (a bf16 cache's remainders are zero, so
// its products skip that term).
absl::Status TensorCoreAttentionTiles(const float* q, const int32_t* tile_first, const int32_t* tile_rows,
                                      int64_t tiles, KvBlockTables tables, const int32_t* positions,
                                      const KvCacheView& cache, const int32_t* kv_head_of, int64_t n_heads,
                                      int64_t n_kv_heads, int64_t head_dim, float* out, cudaStream_t stream);

}  // namespace llama::cuda

#endif  // LLAMA_OPS_CUDA_ATTENTION_MMA_H_
