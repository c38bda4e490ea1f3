// Prefill attention on tensor cores (see attention_mma.h), written with
// mma.sync rather than WMMA because the online softmax rescales the output
// accumulators row by row and turns the scores into the next product's
// operand in registers: both need the fragment layouts, which the PTX ISA
// documents for mma.sync and leaves opaque for WMMA.

#include "ops/cuda/attention_mma.h"

#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "absl/strings/str_format.h"
#include "ops/cuda/attention.h"
#include "ops/cuda/device_util.cuh"

namespace llama::cuda {
namespace {

constexpr int kWarpRows = 16;  // mma's M: the tile's rows one warp owns.
constexpr int kMmaWarps = kAttentionTileRows / kWarpRows;
constexpr int kMmaThreads = 32 * kMmaWarps;
constexpr int kKeys = 64;  // Keys (and values) staged in shared memory per round.
static_assert(kAttentionTileRows % kWarpRows == 0);

// Two bf16 in one register as mma.sync's operands hold them: the lower
// row or column index in the low half.
__device__ __forceinline__ uint32_t Pack(__nv_bfloat16 low, __nv_bfloat16 high) {
  return static_cast<uint32_t>(__bfloat16_as_ushort(low)) | (static_cast<uint32_t>(__bfloat16_as_ushort(high)) << 16);
}

__device__ __forceinline__ uint32_t LoadPair(const __nv_bfloat16* p) { return *reinterpret_cast<const uint32_t*>(p); }

// x = hi + lo, to about 16 significant bits.
struct SplitBf16 {
  __nv_bfloat16 hi, lo;
};
__device__ __forceinline__ SplitBf16 Split(float x) {
  const __nv_bfloat16 hi = __float2bfloat16_rn(x);
  return {hi, __float2bfloat16_rn(x - __bfloat162float(hi))};
}

// d += a b, m16n8k16 with bf16 operands and f32 accumulators. The PTX ISA's
// fragment layouts, with g = lane / 4 and t = lane % 4: a holds rows g and
// g + 8 at columns 2t, 2t + 1 (a[0], a[1]) and 2t + 8, 2t + 9 (a[2], a[3]);
// b holds column g at rows 2t, 2t + 1 (b[0]) and 2t + 8, 2t + 9 (b[1]); d
// holds rows g (d[0], d[1]) and g + 8 (d[2], d[3]) at columns 2t, 2t + 1.
__device__ __forceinline__ void Mma(float d[4], const uint32_t a[4], const uint32_t b[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// The a fragment of rows [0, 16) and columns [column, column + 16) of a
// row-major bf16 matrix with row stride ld.
__device__ __forceinline__ void LoadA(const __nv_bfloat16* m, int ld, int column, int g, int t, uint32_t a[4]) {
  const __nv_bfloat16* p = m + g * ld + column + 2 * t;
  a[0] = LoadPair(p);
  a[1] = LoadPair(p + 8 * ld);
  a[2] = LoadPair(p + 8);
  a[3] = LoadPair(p + 8 * ld + 8);
}

// Shared rows are padded by 8 bf16, so the fragments' loads fall in
// different banks.
constexpr int PaddedRow(int head_dim) { return head_dim + 8; }

template <bool kSplitKv>
constexpr int SharedBytes(int head_dim) {
  return (2 * kAttentionTileRows + (kSplitKv ? 4 : 2) * kKeys) * PaddedRow(head_dim) * 2;
}

// The kernel's shared memory: the tile's queries and a round's keys and
// values, each split in a high and a low part (the keys' and values' low
// parts only with kSplitKv).
struct SharedTile {
  __nv_bfloat16* q_hi;  // [kAttentionTileRows][PaddedRow]
  __nv_bfloat16* q_lo;
  __nv_bfloat16* k_hi;  // [kKeys][PaddedRow]
  __nv_bfloat16* v_hi;
  __nv_bfloat16* k_lo;
  __nv_bfloat16* v_lo;
};

// Helpers of TensorCoreTileKernel, in its order. Those taking threadIdx.x
// over the block are called by all its threads; the others by each warp as
// a whole (their shuffles and mma.sync take every lane).

// The tile's queries, pre-scaled and split, zeros past its rows.
template <int kHeadDim>
__device__ __forceinline__ void StageQueries(const float* q, int64_t first, int64_t rows, int64_t n_heads,
                                             int64_t head, float scale, SharedTile sh) {
  constexpr int kLd = PaddedRow(kHeadDim);
  for (int i = threadIdx.x; i < kAttentionTileRows * kHeadDim; i += kMmaThreads) {
    const int r = i / kHeadDim, d = i % kHeadDim;
    const SplitBf16 s = Split(r < rows ? q[((first + r) * n_heads + head) * kHeadDim + d] * scale : 0.0f);
    sh.q_hi[r * kLd + d] = s.hi;
    sh.q_lo[r * kLd + d] = s.lo;
  }
}

// Keys and values t0 .. t0 + kKeys - 1 from the paged cache, split.
template <typename T, int kHeadDim, bool kSplitKv>
__device__ __forceinline__ void StageKeysValues(int64_t t0, int64_t last, const int32_t* table, int64_t block_size,
                                                int64_t kv_stride, const T* k_cache, const T* v_cache,
                                                SharedTile sh) {
  constexpr int kLd = PaddedRow(kHeadDim);
  for (int i = threadIdx.x; i < kKeys * kHeadDim; i += kMmaThreads) {
    const int j = i / kHeadDim, d = i % kHeadDim;
    float key = 0.0f, value = 0.0f;  // Past `last`: zeros, as the products must stay finite.
    if (t0 + j <= last) {
      const int64_t at = CacheRowOf(table, block_size, t0 + j) * kv_stride + d;
      key = ToFloat(k_cache[at]);
      value = ToFloat(v_cache[at]);
    }
    const SplitBf16 ks = Split(key), vs = Split(value);
    sh.k_hi[j * kLd + d] = ks.hi;
    sh.v_hi[j * kLd + d] = vs.hi;
    if constexpr (kSplitKv) {
      sh.k_lo[j * kLd + d] = ks.lo;
      sh.v_lo[j * kLd + d] = vs.lo;
    }
  }
}

// s = q k^T for the warp's 16 rows and the round's keys.
template <int kHeadDim, bool kSplitKv>
__device__ __forceinline__ void Scores(const __nv_bfloat16* warp_q_hi, const __nv_bfloat16* warp_q_lo, SharedTile sh,
                                       int g, int t, float (&s)[kKeys / 8][4]) {
  constexpr int kLd = PaddedRow(kHeadDim);
  constexpr int kScoreTiles = kKeys / 8;
  const __nv_bfloat16* k_hi = sh.k_hi;
  const __nv_bfloat16* k_lo = sh.k_lo;
#pragma unroll
  for (int c = 0; c < kHeadDim; c += 16) {
    uint32_t a_hi[4], a_lo[4];
    LoadA(warp_q_hi, kLd, c, g, t, a_hi);
    LoadA(warp_q_lo, kLd, c, g, t, a_lo);
#pragma unroll
    for (int n = 0; n < kScoreTiles; ++n) {
      // b = k^T: dimensions c + 2t.. of key 8n + g, adjacent in its row.
      const int at = (8 * n + g) * kLd + c + 2 * t;
      const uint32_t b_hi[2] = {LoadPair(k_hi + at), LoadPair(k_hi + at + 8)};
      Mma(s[n], a_hi, b_hi);
      Mma(s[n], a_lo, b_hi);
      if constexpr (kSplitKv) {
        const uint32_t b_lo[2] = {LoadPair(k_lo + at), LoadPair(k_lo + at + 8)};
        Mma(s[n], a_hi, b_lo);
      }
    }
  }
}

// The causal mask, then the online softmax of rows row[0] (s[.][0..1]) and
// row[1] (s[.][2..3]): s becomes the weights, the running max and sum move
// on, and o is rescaled to the new max. A row's four threads (t = 0..3)
// agree on its max.
template <int kOutTiles>
__device__ __forceinline__ void OnlineSoftmax(int64_t t0, int t, const int (&pos)[2], float (&s)[kKeys / 8][4],
                                              float (&running_max)[2], float (&running_sum)[2],
                                              float (&o)[kOutTiles][4]) {
  constexpr int kScoreTiles = kKeys / 8;
  float block_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int n = 0; n < kScoreTiles; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (t0 + 8 * n + 2 * t + (e & 1) > pos[e / 2]) s[n][e] = -INFINITY;
      block_max[e / 2] = fmaxf(block_max[e / 2], s[n][e]);
    }
  }
  float new_max[2], correction[2], added[2] = {0.0f, 0.0f};
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    block_max[h] = fmaxf(block_max[h], __shfl_xor_sync(0xffffffff, block_max[h], 1));
    block_max[h] = fmaxf(block_max[h], __shfl_xor_sync(0xffffffff, block_max[h], 2));
    new_max[h] = fmaxf(running_max[h], block_max[h]);
    // No key seen yet (a padding row, or all masked): nothing to rescale.
    correction[h] = new_max[h] == -INFINITY ? 1.0f : __expf(running_max[h] - new_max[h]);
    running_max[h] = new_max[h];
  }
#pragma unroll
  for (int n = 0; n < kScoreTiles; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int h = e / 2;
      s[n][e] = new_max[h] == -INFINITY ? 0.0f : __expf(s[n][e] - new_max[h]);
      added[h] += s[n][e];
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) running_sum[h] = running_sum[h] * correction[h] + added[h];
#pragma unroll
  for (int n = 0; n < kOutTiles; ++n) {
    o[n][0] *= correction[0];
    o[n][1] *= correction[0];
    o[n][2] *= correction[1];
    o[n][3] *= correction[1];
  }
}

// o += p v: the scores of keys [16j, 16j + 16) are, as they lie in s[2j]
// and s[2j + 1], exactly an a fragment.
template <int kHeadDim, bool kSplitKv>
__device__ __forceinline__ void AccumulateValues(const float (&s)[kKeys / 8][4], SharedTile sh, int g, int t,
                                                 float (&o)[kHeadDim / 8][4]) {
  constexpr int kLd = PaddedRow(kHeadDim);
  constexpr int kOutTiles = kHeadDim / 8;
  const __nv_bfloat16* v_hi = sh.v_hi;
  const __nv_bfloat16* v_lo = sh.v_lo;
#pragma unroll
  for (int j = 0; j < kKeys / 16; ++j) {
    uint32_t p_hi[4], p_lo[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const SplitBf16 x = Split(s[2 * j + i / 2][2 * (i % 2)]), y = Split(s[2 * j + i / 2][2 * (i % 2) + 1]);
      p_hi[i] = Pack(x.hi, y.hi);
      p_lo[i] = Pack(x.lo, y.lo);
    }
#pragma unroll
    for (int n = 0; n < kOutTiles; ++n) {
      // b = v: dimension 8n + g of keys 16j + 2t, +1 (b[0]) and +8, +9 (b[1]).
      const int at = (16 * j + 2 * t) * kLd + 8 * n + g;
      const uint32_t b_hi[2] = {Pack(v_hi[at], v_hi[at + kLd]), Pack(v_hi[at + 8 * kLd], v_hi[at + 9 * kLd])};
      Mma(o[n], p_hi, b_hi);
      Mma(o[n], p_lo, b_hi);
      if constexpr (kSplitKv) {
        const uint32_t b_lo[2] = {Pack(v_lo[at], v_lo[at + kLd]), Pack(v_lo[at + 8 * kLd], v_lo[at + 9 * kLd])};
        Mma(o[n], p_hi, b_lo);
      }
    }
  }
}

// This thread's two rows of the output, o over each row's sum.
template <int kHeadDim>
__device__ __forceinline__ void WriteRows(const float (&o)[kHeadDim / 8][4], float (&running_sum)[2],
                                          const int (&row)[2], int64_t first, int64_t rows, int64_t n_heads,
                                          int64_t head, int t, float* out) {
  constexpr int kOutTiles = kHeadDim / 8;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    running_sum[h] += __shfl_xor_sync(0xffffffff, running_sum[h], 1);
    running_sum[h] += __shfl_xor_sync(0xffffffff, running_sum[h], 2);
    if (row[h] >= rows) continue;
    float* o_row = out + ((first + row[h]) * n_heads + head) * kHeadDim;
#pragma unroll
    for (int n = 0; n < kOutTiles; ++n) {
      o_row[8 * n + 2 * t] = o[n][2 * h] / running_sum[h];
      o_row[8 * n + 2 * t + 1] = o[n][2 * h + 1] / running_sum[h];
    }
  }
}

// Block (tile, head). The tile's queries, pre-scaled and split, stay in
// shared memory; each round stages kKeys keys and values (split too) from
// the paged cache, and each warp takes its 16 rows through s = q k^T, the
// causal mask, the online softmax (running max and sum per row, the output
// rescaled when the max grows) and o += p v, the scores never leaving
// registers.
template <typename T, int kHeadDim>
__global__ void __launch_bounds__(kMmaThreads)
    TensorCoreTileKernel(const float* q, const int32_t* tile_first, const int32_t* tile_rows, KvBlockTables tables,
                         const int32_t* positions, const T* k_base, const T* v_base, int64_t block_size,
                         const int32_t* kv_head_of, int64_t n_heads, int64_t n_kv_heads, float* out) {
  constexpr bool kSplitKv = !std::is_same_v<T, __nv_bfloat16>;  // A bf16 cache's remainders are zero.
  constexpr int kLd = PaddedRow(kHeadDim);
  constexpr int kScoreTiles = kKeys / 8, kOutTiles = kHeadDim / 8;
  extern __shared__ __align__(16) unsigned char shared[];
  SharedTile sh;
  sh.q_hi = reinterpret_cast<__nv_bfloat16*>(shared);
  sh.q_lo = sh.q_hi + kAttentionTileRows * kLd;
  sh.k_hi = sh.q_lo + kAttentionTileRows * kLd;
  sh.v_hi = sh.k_hi + kKeys * kLd;
  sh.k_lo = sh.v_hi + kKeys * kLd;
  sh.v_lo = sh.k_lo + kKeys * kLd;

  const int64_t first = tile_first[blockIdx.x], rows = tile_rows[blockIdx.x], head = blockIdx.y;
  const int64_t kv_stride = n_kv_heads * kHeadDim;
  const int32_t* table = tables.tables + static_cast<int64_t>(tables.table_of[first]) * tables.table_stride;
  const T* k_cache = k_base + kv_head_of[head] * kHeadDim;
  const T* v_cache = v_base + kv_head_of[head] * kHeadDim;
  const float scale = rsqrtf(static_cast<float>(kHeadDim));
  StageQueries<kHeadDim>(q, first, rows, n_heads, head, scale, sh);
  int64_t last = 0;  // The last position any row of the tile attends to.
  for (int64_t r = 0; r < rows; ++r) last = max(last, static_cast<int64_t>(positions[first + r]));

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int row[2] = {warp * kWarpRows + g, warp * kWarpRows + g + 8};  // This thread's two rows.
  const int pos[2] = {row[0] < rows ? positions[first + row[0]] : -1, row[1] < rows ? positions[first + row[1]] : -1};
  const int warp_last = __reduce_max_sync(0xffffffff, max(pos[0], pos[1]));
  const __nv_bfloat16* warp_q_hi = sh.q_hi + warp * kWarpRows * kLd;
  const __nv_bfloat16* warp_q_lo = sh.q_lo + warp * kWarpRows * kLd;
  float o[kOutTiles][4] = {};
  float running_max[2] = {-INFINITY, -INFINITY}, running_sum[2] = {0.0f, 0.0f};

  for (int64_t t0 = 0; t0 <= last; t0 += kKeys) {
    __syncthreads();  // The queries are written; the last round's keys and values are no longer read.
    StageKeysValues<T, kHeadDim, kSplitKv>(t0, last, table, block_size, kv_stride, k_cache, v_cache, sh);
    __syncthreads();
    if (t0 > warp_last) continue;  // Every row of this warp ends before these keys.

    float s[kScoreTiles][4] = {};
    Scores<kHeadDim, kSplitKv>(warp_q_hi, warp_q_lo, sh, g, t, s);
    OnlineSoftmax<kOutTiles>(t0, t, pos, s, running_max, running_sum, o);
    AccumulateValues<kHeadDim, kSplitKv>(s, sh, g, t, o);
  }
  WriteRows<kHeadDim>(o, running_sum, row, first, rows, n_heads, head, t, out);
}

template <typename T, int kHeadDim>
absl::Status LaunchTiles(const float* q, const int32_t* tile_first, const int32_t* tile_rows, int64_t tiles,
                         KvBlockTables tables, const int32_t* positions, const KvCacheView& cache,
                         const int32_t* kv_head_of, int64_t n_heads, int64_t n_kv_heads, float* out,
                         cudaStream_t stream) {
  constexpr int kShared = SharedBytes<!std::is_same_v<T, __nv_bfloat16>>(kHeadDim);
  // Over the default 48 KB: the kernel must opt in, once.
  static const cudaError_t opted_in =
      cudaFuncSetAttribute(TensorCoreTileKernel<T, kHeadDim>, cudaFuncAttributeMaxDynamicSharedMemorySize, kShared);
  if (opted_in != cudaSuccess) {
    return absl::InternalError(absl::StrFormat("TensorCoreTileKernel: %d bytes of shared memory refused: %s",
                                               kShared, cudaGetErrorString(opted_in)));
  }
  TensorCoreTileKernel<T, kHeadDim><<<dim3(tiles, n_heads), kMmaThreads, kShared, stream>>>(
      q, tile_first, tile_rows, tables, positions, static_cast<const T*>(cache.k), static_cast<const T*>(cache.v),
      cache.block_size, kv_head_of, n_heads, n_kv_heads, out);
  return Launched("TensorCoreTileKernel");
}

}  // namespace

bool TensorCoreAttentionFits(int64_t head_dim) { return head_dim == 64 || head_dim == 128; }

absl::Status TensorCoreAttentionTiles(const float* q, const int32_t* tile_first, const int32_t* tile_rows,
                                      int64_t tiles, KvBlockTables tables, const int32_t* positions,
                                      const KvCacheView& cache, const int32_t* kv_head_of, int64_t n_heads,
                                      int64_t n_kv_heads, int64_t head_dim, float* out, cudaStream_t stream) {
  if (!TensorCoreAttentionFits(head_dim)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("TensorCoreAttentionTiles: head_dim %d; expected 64 or 128", head_dim));
  }
  if (tiles == 0) return absl::OkStatus();
  return ForCacheType(cache.dtype, "TensorCoreAttentionTiles", [&](auto zero) {
    using T = decltype(zero);
    return head_dim == 128 ? LaunchTiles<T, 128>(q, tile_first, tile_rows, tiles, tables, positions, cache, kv_head_of,
                                                 n_heads, n_kv_heads, out, stream)
                           : LaunchTiles<T, 64>(q, tile_first, tile_rows, tiles, tables, positions, cache, kv_head_of,
                                                n_heads, n_kv_heads, out, stream);
  });
}

}  // namespace llama::cuda
