// Storing keys and values, and causal attention over the cache: row by row,
// a tile of prefill rows at a time, or decode rows split over the context.

#include "ops/cuda/attention.h"

#include <algorithm>

#include "base/status_macros.h"
#include "ops/cuda/attention_mma.h"
#include "ops/cuda/device_util.cuh"

namespace llama::cuda {
namespace {

// Row `row`'s block table.
__device__ inline const int32_t* TableOf(const KvBlockTables& tables, int64_t row) {
  return tables.tables + static_cast<int64_t>(tables.table_of[row]) * tables.table_stride;
}

template <typename T>
__global__ void StoreKvKernel(const float* k, const float* v, int64_t kv_width, KvBlockTables tables,
                              const int32_t* positions, T* k_cache, T* v_cache, int64_t block_size) {
  const int64_t row = blockIdx.x;
  const int64_t base = CacheRowOf(TableOf(tables, row), block_size, positions[row]) * kv_width;
  for (int64_t i = threadIdx.x; i < kv_width; i += blockDim.x) {
    k_cache[base + i] = FromFloat<T>(k[row * kv_width + i]);
    v_cache[base + i] = FromFloat<T>(v[row * kv_width + i]);
  }
}

// One block per (row, head). The scores are not kept (their number grows
// with the context): one pass finds the maximum, a second accumulates the
// exponentials and the weighted values, recomputing the dot products.
template <typename T>
__global__ void AttentionKernel(const float* q, KvBlockTables tables, const int32_t* positions, const T* k_cache,
                                const T* v_cache, int64_t block_size, const int32_t* kv_head_of, int64_t n_heads,
                                int64_t n_kv_heads, int64_t head_dim, float* out) {
  const int64_t row = blockIdx.x / n_heads, head = blockIdx.x % n_heads;
  const int64_t pos = positions[row];
  const int32_t* table = TableOf(tables, row);
  const float* qv = q + (row * n_heads + head) * head_dim;
  const int64_t kv = kv_head_of[head];
  const int64_t stride = n_kv_heads * head_dim;
  const float scale = rsqrtf(static_cast<float>(head_dim));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  // Each warp takes positions t = warp, warp + warps, ...; lanes split the head dimension.
  float local_max = -FLT_MAX;
  for (int64_t t = warp; t <= pos; t += warps) {
    const T* k = k_cache + CacheRowOf(table, block_size, t) * stride + kv * head_dim;
    float dot = 0.0f;
    for (int64_t d = lane; d < head_dim; d += 32) dot += qv[d] * ToFloat(k[d]);
    local_max = fmaxf(local_max, WarpSum(dot) * scale);
  }
  const float max_score = BlockReduce<true>(local_max);
  extern __shared__ float accumulators[];  // [warps, head_dim]
  float* acc = accumulators + warp * head_dim;
  for (int64_t d = lane; d < head_dim; d += 32) acc[d] = 0.0f;
  float local_sum = 0.0f;
  for (int64_t t = warp; t <= pos; t += warps) {
    const int64_t cache_row = CacheRowOf(table, block_size, t);
    const T* k = k_cache + cache_row * stride + kv * head_dim;
    const T* v = v_cache + cache_row * stride + kv * head_dim;
    float dot = 0.0f;
    for (int64_t d = lane; d < head_dim; d += 32) dot += qv[d] * ToFloat(k[d]);
    const float weight = __expf(WarpSum(dot) * scale - max_score);
    local_sum += weight;
    for (int64_t d = lane; d < head_dim; d += 32) acc[d] += weight * ToFloat(v[d]);
  }
  const float sum = BlockReduce<false>(lane == 0 ? local_sum : 0.0f);
  __syncthreads();
  float* o = out + (row * n_heads + head) * head_dim;
  for (int64_t d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float total = 0.0f;
    for (int w = 0; w < warps; ++w) total += accumulators[w * head_dim + d];
    o[d] = total / sum;
  }
}

constexpr int kKeyBlock = 32;      // Keys (and values) staged per round: one per lane.
constexpr int kTileThreads = 128;  // Four warps, four query rows each.
constexpr int kCoreTileRows = 16;  // Rows of a tile per block (blockIdx.z: which 16).
constexpr int kRowsPerWarp = kCoreTileRows / (kTileThreads / 32);
static_assert(kAttentionTileRows % kCoreTileRows == 0);
constexpr int kMaxDimsPerLane = 4;  // head_dim <= 128.

// Helpers of AttentionTileKernel, called by every thread of the block.

// The tile's query rows, pre-scaled, zeros past its rows.
__device__ __forceinline__ void StageTileQueries(const float* q, int64_t first, int64_t rows, int64_t n_heads,
                                                 int64_t head, int64_t head_dim, int64_t stride, float scale,
                                                 float* q_tile) {
  for (int64_t i = threadIdx.x; i < kCoreTileRows * head_dim; i += blockDim.x) {
    const int64_t r = i / head_dim, d = i % head_dim;
    q_tile[r * stride + d] = r < rows ? q[((first + r) * n_heads + head) * head_dim + d] * scale : 0.0f;
  }
}

// Keys and values t0 .. t0 + kKeyBlock - 1 from the paged cache, zeros past
// `last`.
template <typename T>
__device__ __forceinline__ void StageKeyBlock(int64_t t0, int64_t last, const int32_t* table, int64_t block_size,
                                              int64_t kv_stride, const T* k_cache, const T* v_cache,
                                              int64_t head_dim, int64_t stride, float* k_block, float* v_block) {
  for (int64_t i = threadIdx.x; i < kKeyBlock * head_dim; i += blockDim.x) {
    const int64_t j = i / head_dim, d = i % head_dim, t = t0 + j;
    const int64_t cache_row = t <= last ? CacheRowOf(table, block_size, t) : 0;
    k_block[j * stride + d] = t <= last ? ToFloat(k_cache[cache_row * kv_stride + d]) : 0.0f;
    v_block[j * stride + d] = t <= last ? ToFloat(v_cache[cache_row * kv_stride + d]) : 0.0f;
  }
}

// One block per (16 rows of a tile, head); see AttentionTiles. Shared rows
// are padded to head_dim + 1 floats, so the 32 lanes reading one column of
// the key block (a key each) hit 32 different banks.
template <typename T>
__global__ void __launch_bounds__(kTileThreads)
    AttentionTileKernel(const float* q, const int32_t* tile_first, const int32_t* tile_rows, KvBlockTables tables,
                        const int32_t* positions, const T* k_base, const T* v_base, int64_t block_size,
                        const int32_t* kv_head_of, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float* out) {
  extern __shared__ float staged[];
  const int64_t stride = head_dim + 1;
  float* q_tile = staged;                             // [kCoreTileRows][stride], pre-scaled
  float* k_block = q_tile + kCoreTileRows * stride;   // [kKeyBlock][stride]
  float* v_block = k_block + kKeyBlock * stride;      // [kKeyBlock][stride]
  const int64_t sub_tile = kCoreTileRows * static_cast<int64_t>(blockIdx.z), head = blockIdx.y;
  const int64_t first = tile_first[blockIdx.x] + sub_tile;
  const int64_t rows = min(static_cast<int64_t>(kCoreTileRows), tile_rows[blockIdx.x] - sub_tile);
  if (rows <= 0) return;  // The tile is shorter: the whole block leaves together.
  const int64_t kv_stride = n_kv_heads * head_dim, kv = kv_head_of[head];
  const int32_t* table = TableOf(tables, first);  // Every row of a tile is of one sequence.
  const T* k_cache = k_base + kv * head_dim;
  const T* v_cache = v_base + kv * head_dim;
  const float scale = rsqrtf(static_cast<float>(head_dim));
  StageTileQueries(q, first, rows, n_heads, head, head_dim, stride, scale, q_tile);
  int64_t last = 0;  // The last position any row of the tile attends to.
  for (int64_t r = 0; r < rows; ++r) last = max(last, static_cast<int64_t>(positions[first + r]));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float running_max[kRowsPerWarp], running_sum[kRowsPerWarp], acc[kRowsPerWarp][kMaxDimsPerLane];
  int64_t pos[kRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t row = warp * kRowsPerWarp + r;
    pos[r] = row < rows ? positions[first + row] : -1;
    running_max[r] = -INFINITY;
    running_sum[r] = 0.0f;
#pragma unroll
    for (int i = 0; i < kMaxDimsPerLane; ++i) acc[r][i] = 0.0f;
  }
  for (int64_t t0 = 0; t0 <= last; t0 += kKeyBlock) {
    __syncthreads();  // The previous round's keys and values are no longer read.
    StageKeyBlock(t0, last, table, block_size, kv_stride, k_cache, v_cache, head_dim, stride, k_block, v_block);
    __syncthreads();
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      if (pos[r] < t0) continue;  // The same for the whole warp: a row, not a lane.
      const float* query = q_tile + (warp * kRowsPerWarp + r) * stride;
      const float* key = k_block + lane * stride;
      float score = 0.0f;
      for (int64_t d = 0; d < head_dim; ++d) score += query[d] * key[d];
      if (t0 + lane > pos[r]) score = -INFINITY;  // Causal mask.
      // Online softmax: rescale what was summed so far to the new maximum
      // (key t0 is visible, so the block's maximum is finite).
      const float new_max = fmaxf(running_max[r], WarpMax(score));
      const float correction = __expf(running_max[r] - new_max);
      const float weight = __expf(score - new_max);
      running_sum[r] = running_sum[r] * correction + WarpSum(weight);
      running_max[r] = new_max;
#pragma unroll
      for (int i = 0; i < kMaxDimsPerLane; ++i) acc[r][i] *= correction;
      for (int j = 0; j < kKeyBlock; ++j) {
        const float w = __shfl_sync(0xffffffff, weight, j);
#pragma unroll
        for (int i = 0; i < kMaxDimsPerLane; ++i) {
          const int64_t d = lane + 32 * i;
          if (d < head_dim) acc[r][i] += w * v_block[j * stride + d];
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t row = warp * kRowsPerWarp + r;
    if (row >= rows) continue;
#pragma unroll
    for (int i = 0; i < kMaxDimsPerLane; ++i) {
      const int64_t d = lane + 32 * i;
      if (d < head_dim) out[((first + row) * n_heads + head) * head_dim + d] = acc[r][i] / running_sum[r];
    }
  }
}

constexpr int kDecodeThreads = 128;  // Four warps.
constexpr int kDecodeMaxSplits = 64;
constexpr int kDecodeMinSplitPositions = 32;

// Block (row * n_heads + head, split): an online softmax over the split's
// positions, a warp per position at a time, lanes over the head dimension;
// the warps' sums are then merged. Writes the split's unnormalised output
// and its (max, sum of exponentials); an empty split writes (-inf, 0).
template <typename T>
__global__ void __launch_bounds__(kDecodeThreads)
    DecodeSplitKernel(const float* q, KvBlockTables tables, const int32_t* positions, const T* k_base,
                      const T* v_base, int64_t block_size, const int32_t* kv_head_of, int64_t n_heads,
                      int64_t n_kv_heads, int64_t head_dim, int64_t split_positions, float* partial, float* stats) {
  constexpr int kWarps = kDecodeThreads / 32;
  __shared__ float warp_max[kWarps], warp_sum[kWarps], warp_acc[kWarps][32 * kMaxDimsPerLane];
  const int64_t row_head = blockIdx.x, row = row_head / n_heads, head = row_head % n_heads;
  const int64_t splits = gridDim.y, split = blockIdx.y;
  const int64_t pos = positions[row];
  const int64_t begin = split * split_positions, end = min(begin + split_positions, pos + 1);
  const int64_t stride = n_kv_heads * head_dim, kv = kv_head_of[head];
  const int32_t* table = TableOf(tables, row);
  const T* k_cache = k_base + kv * head_dim;
  const T* v_cache = v_base + kv * head_dim;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const float scale = rsqrtf(static_cast<float>(head_dim));
  float query[kMaxDimsPerLane], acc[kMaxDimsPerLane];
#pragma unroll
  for (int i = 0; i < kMaxDimsPerLane; ++i) {
    const int64_t d = lane + 32 * i;
    query[i] = d < head_dim ? q[row_head * head_dim + d] * scale : 0.0f;
    acc[i] = 0.0f;
  }
  float running_max = -INFINITY, running_sum = 0.0f;
  for (int64_t t = begin + warp; t < end; t += kWarps) {
    const int64_t cache_row = CacheRowOf(table, block_size, t);
    const T* key = k_cache + cache_row * stride;
    const T* value = v_cache + cache_row * stride;
    float dot = 0.0f;
#pragma unroll
    for (int i = 0; i < kMaxDimsPerLane; ++i) {
      const int64_t d = lane + 32 * i;
      if (d < head_dim) dot += query[i] * ToFloat(key[d]);
    }
    const float score = WarpSum(dot);
    const float new_max = fmaxf(running_max, score);
    const float correction = __expf(running_max - new_max);  // 0 on the first position.
    const float weight = __expf(score - new_max);
    running_sum = running_sum * correction + weight;
    running_max = new_max;
#pragma unroll
    for (int i = 0; i < kMaxDimsPerLane; ++i) {
      const int64_t d = lane + 32 * i;
      acc[i] = acc[i] * correction + (d < head_dim ? weight * ToFloat(value[d]) : 0.0f);
    }
  }
  if (lane == 0) {
    warp_max[warp] = running_max;
    warp_sum[warp] = running_sum;
  }
#pragma unroll
  for (int i = 0; i < kMaxDimsPerLane; ++i) warp_acc[warp][lane + 32 * i] = acc[i];
  __syncthreads();
  float block_max = -INFINITY;
  for (int w = 0; w < kWarps; ++w) block_max = fmaxf(block_max, warp_max[w]);
  float* out = partial + (row_head * splits + split) * head_dim;
  const bool empty = block_max == -INFINITY;
  for (int64_t d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float total = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      if (!empty && warp_max[w] != -INFINITY) total += warp_acc[w][d] * __expf(warp_max[w] - block_max);
    }
    out[d] = total;
  }
  if (threadIdx.x == 0) {
    float sum = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      if (!empty && warp_max[w] != -INFINITY) sum += warp_sum[w] * __expf(warp_max[w] - block_max);
    }
    stats[(row_head * splits + split) * 2] = block_max;
    stats[(row_head * splits + split) * 2 + 1] = sum;
  }
}

// Block row * n_heads + head: the splits rescaled to their common maximum
// (position 0 is in split 0, so it is finite) and normalised.
__global__ void DecodeCombineKernel(const float* partial, const float* stats, int64_t splits, int64_t head_dim,
                                    float* out) {
  const int64_t row_head = blockIdx.x;
  const float* s = stats + row_head * splits * 2;
  float global_max = -INFINITY;
  for (int64_t i = 0; i < splits; ++i) global_max = fmaxf(global_max, s[2 * i]);
  float sum = 0.0f;
  for (int64_t i = 0; i < splits; ++i) {
    if (s[2 * i] != -INFINITY) sum += s[2 * i + 1] * __expf(s[2 * i] - global_max);
  }
  for (int64_t d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float total = 0.0f;
    for (int64_t i = 0; i < splits; ++i) {
      if (s[2 * i] != -INFINITY) total += partial[(row_head * splits + i) * head_dim + d] * __expf(s[2 * i] - global_max);
    }
    out[row_head * head_dim + d] = total / sum;
  }
}

}  // namespace

absl::Status StoreKv(const float* k, const float* v, int64_t n, int64_t kv_width, KvBlockTables tables,
                     const int32_t* positions, const KvCacheView& cache, cudaStream_t stream) {
  if (n == 0) return absl::OkStatus();
  return ForCacheType(cache.dtype, "StoreKv", [&](auto zero) {
    using T = decltype(zero);
    StoreKvKernel<T><<<n, kThreads, 0, stream>>>(k, v, kv_width, tables, positions, static_cast<T*>(cache.k),
                                                 static_cast<T*>(cache.v), cache.block_size);
    return Launched("StoreKvKernel");
  });
}

absl::Status Attention(const float* q, int64_t n, KvBlockTables tables, const int32_t* positions,
                       const KvCacheView& cache, const int32_t* kv_head_of, int64_t n_heads, int64_t n_kv_heads,
                       int64_t head_dim, float* out, cudaStream_t stream) {
  if (n == 0) return absl::OkStatus();
  constexpr int kAttentionThreads = 128;  // 4 warps, each with a [head_dim] accumulator.
  const size_t shared = (kAttentionThreads / 32) * head_dim * sizeof(float);
  return ForCacheType(cache.dtype, "Attention", [&](auto zero) {
    using T = decltype(zero);
    AttentionKernel<T><<<n * n_heads, kAttentionThreads, shared, stream>>>(
        q, tables, positions, static_cast<const T*>(cache.k), static_cast<const T*>(cache.v), cache.block_size,
        kv_head_of, n_heads, n_kv_heads, head_dim, out);
    return Launched("AttentionKernel");
  });
}

absl::Status AttentionTiles(const float* q, const int32_t* tile_first, const int32_t* tile_rows, int64_t tiles,
                            KvBlockTables tables, const int32_t* positions, const KvCacheView& cache,
                            const int32_t* kv_head_of, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                            float* out, cudaStream_t stream) {
  if (tiles == 0) return absl::OkStatus();
  if (TensorCoreAttentionFits(head_dim)) {
    return TensorCoreAttentionTiles(q, tile_first, tile_rows, tiles, tables, positions, cache, kv_head_of, n_heads,
                                    n_kv_heads, head_dim, out, stream);
  }
  if (head_dim > 32 * kMaxDimsPerLane) {
    return absl::InvalidArgumentError(
        absl::StrFormat("AttentionTiles: head_dim %d; at most %d", head_dim, 32 * kMaxDimsPerLane));
  }
  const size_t shared = (kCoreTileRows + 2 * kKeyBlock) * (head_dim + 1) * sizeof(float);
  return ForCacheType(cache.dtype, "AttentionTiles", [&](auto zero) {
    using T = decltype(zero);
    AttentionTileKernel<T><<<dim3(tiles, n_heads, kAttentionTileRows / kCoreTileRows), kTileThreads, shared, stream>>>(
        q, tile_first, tile_rows, tables, positions, static_cast<const T*>(cache.k), static_cast<const T*>(cache.v),
        cache.block_size, kv_head_of, n_heads, n_kv_heads, head_dim, out);
    return Launched("AttentionTileKernel");
  });
}

}  // namespace llama::cuda

namespace llama::cuda {

int64_t DecodeSplitPositions(int64_t max_positions) {
  return std::max<int64_t>(kDecodeMinSplitPositions, (max_positions + kDecodeMaxSplits - 1) / kDecodeMaxSplits);
}

int64_t DecodeAttentionScratchFloats(int64_t n, int64_t n_heads, int64_t head_dim, int64_t max_positions) {
  const int64_t split = DecodeSplitPositions(max_positions), splits = (max_positions + split - 1) / split;
  return n * n_heads * splits * (head_dim + 2);
}

absl::Status DecodeAttention(const float* q, int64_t n, KvBlockTables tables, const int32_t* positions,
                             const KvCacheView& cache, const int32_t* kv_head_of, int64_t n_heads, int64_t n_kv_heads,
                             int64_t head_dim, int64_t max_positions, float* scratch, float* out,
                             cudaStream_t stream) {
  if (n == 0) return absl::OkStatus();
  if (head_dim > 32 * kMaxDimsPerLane) {
    return absl::InvalidArgumentError(
        absl::StrFormat("DecodeAttention: head_dim %d; at most %d", head_dim, 32 * kMaxDimsPerLane));
  }
  const int64_t split = DecodeSplitPositions(max_positions), splits = (max_positions + split - 1) / split;
  float* partial = scratch;
  float* stats = scratch + n * n_heads * splits * head_dim;
  RETURN_IF_ERROR(ForCacheType(cache.dtype, "DecodeAttention", [&](auto zero) {
    using T = decltype(zero);
    DecodeSplitKernel<T><<<dim3(n * n_heads, splits), kDecodeThreads, 0, stream>>>(
        q, tables, positions, static_cast<const T*>(cache.k), static_cast<const T*>(cache.v), cache.block_size,
        kv_head_of, n_heads, n_kv_heads, head_dim, split, partial, stats);
    return Launched("DecodeSplitKernel");
  }));
  DecodeCombineKernel<<<n * n_heads, 128, 0, stream>>>(partial, stats, splits, head_dim, out);
  return Launched("DecodeCombineKernel");
}

}  // namespace llama::cuda
