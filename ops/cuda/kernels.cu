// Straightforward kernels: one block per row (or per row and head), warp
// shuffles for reductions. Correct first; the GPU check script's parity
// tests guard them, and faster versions replace them behind the same
// launchers.

#include "ops/cuda/kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cfloat>
#include <cstdint>

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "absl/strings/str_format.h"

namespace llama::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float Load(const void* p, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kF16:
      return __half2float(static_cast<const __half*>(p)[i]);
    case DType::kBF16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}

__device__ __forceinline__ float ToFloat(float x) { return x; }
__device__ __forceinline__ float ToFloat(__half x) { return __half2float(x); }
__device__ __forceinline__ float ToFloat(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__device__ __forceinline__ T FromFloat(float x);
template <>
__device__ __forceinline__ float FromFloat<float>(float x) { return x; }
template <>
__device__ __forceinline__ __half FromFloat<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

__device__ __forceinline__ float WarpSum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffff, v, offset);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, offset));
  return v;
}

// Sum (or max) over the block; every thread gets the result.
template <bool kMax>
__device__ float BlockReduce(float v) {
  __shared__ float partial[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = kMax ? WarpMax(v) : WarpSum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) / 32;
  v = lane < warps ? partial[lane] : (kMax ? -FLT_MAX : 0.0f);
  v = kMax ? WarpMax(v) : WarpSum(v);
  __syncthreads();
  return v;
}

__global__ void EmbeddingKernel(const int32_t* tokens, const void* table, DType dtype, int64_t width, float* out) {
  const int64_t row = blockIdx.x;
  const int64_t base = static_cast<int64_t>(tokens[row]) * width;
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) out[row * width + i] = Load(table, dtype, base + i);
}

__global__ void RmsNormKernel(const float* x, const void* weight, DType dtype, int64_t dim, float eps, float* out) {
  const float* in = x + blockIdx.x * dim;
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) sum += in[i] * in[i];
  sum = BlockReduce<false>(sum);
  const float scale = rsqrtf(sum / static_cast<float>(dim) + eps);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    out[blockIdx.x * dim + i] = in[i] * scale * Load(weight, dtype, i);
  }
}

__global__ void RopeKernel(float* x, int64_t heads, int64_t head_dim, const int32_t* positions, const float* cos,
                           const float* sin) {
  const int64_t row = blockIdx.x, half = head_dim / 2;
  const float* c = cos + static_cast<int64_t>(positions[row]) * half;
  const float* s = sin + static_cast<int64_t>(positions[row]) * half;
  for (int64_t j = threadIdx.x; j < heads * half; j += blockDim.x) {
    const int64_t h = j / half, i = j % half;
    float* v = x + (row * heads + h) * head_dim;
    const float re = v[2 * i], im = v[2 * i + 1];
    v[2 * i] = re * c[i] - im * s[i];
    v[2 * i + 1] = re * s[i] + im * c[i];
  }
}

__global__ void SwiGluKernel(float* gate, const float* up, int64_t count) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const float g = gate[i];
    gate[i] = g / (1.0f + __expf(-g)) * up[i];
  }
}

__global__ void AddKernel(float* x, const float* y, int64_t count) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    x[i] += y[i];
  }
}

__global__ void CastKernel(const float* in, void* out, DType to, int64_t count) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    if (to == DType::kBF16) {
      static_cast<__nv_bfloat16*>(out)[i] = __float2bfloat16_rn(in[i]);
    } else {
      static_cast<__half*>(out)[i] = __float2half_rn(in[i]);
    }
  }
}

template <typename T>
__global__ void StoreKvKernel(const float* k, const float* v, int64_t kv_width, const int32_t* slots,
                              const int32_t* positions, T* k_cache, T* v_cache, int64_t slot_stride) {
  const int64_t row = blockIdx.x;
  const int64_t base = slots[row] * slot_stride + static_cast<int64_t>(positions[row]) * kv_width;
  for (int64_t i = threadIdx.x; i < kv_width; i += blockDim.x) {
    k_cache[base + i] = FromFloat<T>(k[row * kv_width + i]);
    v_cache[base + i] = FromFloat<T>(v[row * kv_width + i]);
  }
}

// One block per (row, head). The scores are not kept (their number grows
// with the context): one pass finds the maximum, a second accumulates the
// exponentials and the weighted values, recomputing the dot products.
template <typename T>
__global__ void AttentionKernel(const float* q, const int32_t* slots, const int32_t* positions, const T* k_base,
                                const T* v_base, int64_t slot_stride, const int32_t* kv_head_of, int64_t n_heads,
                                int64_t n_kv_heads, int64_t head_dim, float* out) {
  const int64_t row = blockIdx.x / n_heads, head = blockIdx.x % n_heads;
  const int64_t pos = positions[row];
  const T* k_cache = k_base + slots[row] * slot_stride;
  const T* v_cache = v_base + slots[row] * slot_stride;
  const float* qv = q + (row * n_heads + head) * head_dim;
  const int64_t kv = kv_head_of[head];
  const int64_t stride = n_kv_heads * head_dim;
  const float scale = rsqrtf(static_cast<float>(head_dim));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  // Each warp takes positions t = warp, warp + warps, ...; lanes split the head dimension.
  float local_max = -FLT_MAX;
  for (int64_t t = warp; t <= pos; t += warps) {
    const T* k = k_cache + t * stride + kv * head_dim;
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
    const T* k = k_cache + t * stride + kv * head_dim;
    const T* v = v_cache + t * stride + kv * head_dim;
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
constexpr int kRowsPerWarp = kAttentionTileRows / (kTileThreads / 32);
constexpr int kMaxDimsPerLane = 4;  // head_dim <= 128.

// One block per (tile, head); see AttentionTiles in kernels.h. Shared rows
// are padded to head_dim + 1 floats, so the 32 lanes reading one column of
// the key block (a key each) hit 32 different banks.
template <typename T>
__global__ void __launch_bounds__(kTileThreads)
    AttentionTileKernel(const float* q, const int32_t* tile_first, const int32_t* tile_rows, const int32_t* slots,
                        const int32_t* positions, const T* k_base, const T* v_base, int64_t slot_stride,
                        const int32_t* kv_head_of, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float* out) {
  extern __shared__ float staged[];
  const int64_t stride = head_dim + 1;
  float* q_tile = staged;                             // [kAttentionTileRows][stride], pre-scaled
  float* k_block = q_tile + kAttentionTileRows * stride;  // [kKeyBlock][stride]
  float* v_block = k_block + kKeyBlock * stride;          // [kKeyBlock][stride]
  const int64_t first = tile_first[blockIdx.x], rows = tile_rows[blockIdx.x], head = blockIdx.y;
  const int64_t kv_stride = n_kv_heads * head_dim, kv = kv_head_of[head];
  const T* k_cache = k_base + slots[first] * slot_stride + kv * head_dim;
  const T* v_cache = v_base + slots[first] * slot_stride + kv * head_dim;
  const float scale = rsqrtf(static_cast<float>(head_dim));
  for (int64_t i = threadIdx.x; i < kAttentionTileRows * head_dim; i += blockDim.x) {
    const int64_t r = i / head_dim, d = i % head_dim;
    q_tile[r * stride + d] = r < rows ? q[((first + r) * n_heads + head) * head_dim + d] * scale : 0.0f;
  }
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
    for (int64_t i = threadIdx.x; i < kKeyBlock * head_dim; i += blockDim.x) {
      const int64_t j = i / head_dim, d = i % head_dim, t = t0 + j;
      k_block[j * stride + d] = t <= last ? ToFloat(k_cache[t * kv_stride + d]) : 0.0f;
      v_block[j * stride + d] = t <= last ? ToFloat(v_cache[t * kv_stride + d]) : 0.0f;
    }
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

__global__ void GatherRowsKernel(const float* x, const int32_t* rows, int64_t width, float* out) {
  const float* in = x + static_cast<int64_t>(rows[blockIdx.x]) * width;
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) out[blockIdx.x * width + i] = in[i];
}

__global__ void NonFiniteKernel(const float* x, int64_t count, int32_t* flag) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    if (!isfinite(x[i])) {
      *flag = 1;
      return;
    }
  }
}

constexpr int kSampleThreads = 512;

struct ValueIndex {
  float value;
  int index;
};

// The larger value; the smaller index on ties (the first maximum, as the CPU).
struct FirstMax {
  __device__ ValueIndex operator()(const ValueIndex& a, const ValueIndex& b) const {
    return b.value > a.value || (b.value == a.value && b.index < a.index) ? b : a;
  }
};

// One block per row; see SampleRows in kernels.h for the method.
__global__ void __launch_bounds__(kSampleThreads)
    SampleKernel(const float* logits, int64_t vocab, const RowSampling* params, float* probs, int32_t* tokens,
                 float* logprobs) {
  using PairReduce = cub::BlockReduce<ValueIndex, kSampleThreads>;
  using DoubleReduce = cub::BlockReduce<double, kSampleThreads>;
  using IntMax = cub::BlockReduce<int, kSampleThreads>;
  using IntScan = cub::BlockScan<int, kSampleThreads>;
  using DoubleScan = cub::BlockScan<double, kSampleThreads>;
  __shared__ union {
    typename PairReduce::TempStorage pair;
    typename DoubleReduce::TempStorage sum;
    typename IntMax::TempStorage max;
    typename IntScan::TempStorage int_scan;
    typename DoubleScan::TempStorage double_scan;
  } temp;
  __shared__ ValueIndex shared_best;
  __shared__ double shared_sum;
  __shared__ int shared_int;
  // cub leaves a reduction's result in thread 0: share it, and sync before
  // the union is reused.
  const auto block_sum = [&](double v) {
    const double total = DoubleReduce(temp.sum).Sum(v);
    if (threadIdx.x == 0) shared_sum = total;
    __syncthreads();
    const double result = shared_sum;
    __syncthreads();
    return result;
  };
  const int64_t row = blockIdx.x;
  const float* l = logits + row * vocab;
  float* p = probs + row * vocab;
  const RowSampling params_row = params[row];

  ValueIndex best{-FLT_MAX, 0};
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    if (l[i] > best.value) best = {l[i], static_cast<int>(i)};
  }
  best = PairReduce(temp.pair).Reduce(best, FirstMax());
  if (threadIdx.x == 0) shared_best = best;
  __syncthreads();
  best = shared_best;
  __syncthreads();
  const float max_logit = best.value;
  double local = 0.0;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) local += __expf(l[i] - max_logit);
  const double log_normaliser = log(block_sum(local));

  int token = best.index;
  if (params_row.temperature > 0) {
    local = 0.0;
    for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
      p[i] = expf((l[i] - max_logit) / params_row.temperature);
      local += p[i];
    }
    __syncthreads();
    const double limit = params_row.top_p * block_sum(local);
    // Token k (by descending probability) is kept while the mass before it
    // is <= limit: the kept set is every p above the smallest threshold t
    // whose mass above is <= limit, plus ties at t in id order. Positive
    // floats order as their bit patterns: bisect those, in [0, 1].
    uint32_t lo = 0, hi = __float_as_uint(1.0f);
    while (lo < hi) {
      const uint32_t mid = lo + (hi - lo) / 2;
      const float t = __uint_as_float(mid);
      local = 0.0;
      for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) local += p[i] > t ? p[i] : 0.0f;
      if (block_sum(local) <= limit) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    const float t = __uint_as_float(lo);
    // Contiguous segments per thread, so prefix sums run in token-id order.
    const int64_t segment = (vocab + blockDim.x - 1) / blockDim.x;
    const int64_t begin = min(vocab, threadIdx.x * segment), end = min(vocab, begin + segment);
    double above = 0.0;
    int ties = 0;
    for (int64_t i = begin; i < end; ++i) {
      if (p[i] > t) above += p[i];
      ties += p[i] == t;
    }
    const double mass_above = block_sum(above);
    int tie_rank = 0, all_ties = 0;
    IntScan(temp.int_scan).ExclusiveSum(ties, tie_rank, all_ties);
    __syncthreads();
    // The m-th tie (in id order) is kept while mass_above + m * t <= limit.
    const double room = t > 0 ? floor((limit - mass_above) / t) + 1 : static_cast<double>(all_ties);
    const int kept_ties = static_cast<int>(fmin(fmax(room, 0.0), static_cast<double>(all_ties)));
    double mass = 0.0;
    int last_kept = -1;
    for (int64_t i = begin; i < end; ++i) {
      bool kept = p[i] > t;
      if (p[i] == t) kept = tie_rank++ < kept_ties;
      if (kept) mass += p[i];
      if (kept && p[i] > 0) last_kept = static_cast<int>(i);
    }
    double before = 0.0, kept_mass = 0.0;
    DoubleScan(temp.double_scan).ExclusiveSum(mass, before, kept_mass);
    if (threadIdx.x == 0) shared_int = INT32_MAX;
    __syncthreads();
    const double target = params_row.uniform * kept_mass;
    if (mass > 0 && target >= before && target < before + mass) {
      // The target falls in this segment: walk it again. Should rounding
      // carry the walk past its end, the segment's last kept token is it.
      tie_rank -= ties;
      double cumulative = before;
      int pick = last_kept;
      for (int64_t i = begin; i < end; ++i) {
        bool kept = p[i] > t;
        if (p[i] == t) kept = tie_rank++ < kept_ties;
        if (!kept) continue;
        cumulative += p[i];
        if (target < cumulative) {
          pick = static_cast<int>(i);
          break;
        }
      }
      atomicMin(&shared_int, pick);
    }
    __syncthreads();
    token = shared_int;
    __syncthreads();
    if (token == INT32_MAX) {
      // Rounding put the target past every segment: the last kept token
      // with mass, as the CPU does.
      last_kept = IntMax(temp.max).Reduce(last_kept, [](int a, int b) { return a > b ? a : b; });
      if (threadIdx.x == 0) shared_int = last_kept;
      __syncthreads();
      token = shared_int;
    }
  }
  // A NaN or infinite logit leaves no kept token (the sums are NaN): pick the
  // largest comparable logit rather than an index outside the row. The
  // caller flags non-finite logits and fails the step, as the CPU model does.
  if (token < 0 || token >= vocab) token = best.index;
  if (threadIdx.x == 0) {
    tokens[row] = token;
    logprobs[row] = static_cast<float>(l[token] - max_logit - log_normaliser);
  }
}

int Blocks(int64_t count) {
  const int64_t wanted = (count + kThreads - 1) / kThreads;
  return static_cast<int>(wanted < 65535 ? (wanted > 0 ? wanted : 1) : 65535);
}

absl::Status Launched(const char* kernel) {
  const cudaError_t code = cudaGetLastError();
  if (code == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrFormat("%s launch failed: %s", kernel, cudaGetErrorString(code)));
}

}  // namespace

absl::Status EmbeddingLookup(const int32_t* tokens, int64_t n, const void* table, DType dtype, int64_t width,
                             float* out, cudaStream_t stream) {
  if (n == 0) return absl::OkStatus();
  EmbeddingKernel<<<n, kThreads, 0, stream>>>(tokens, table, dtype, width, out);
  return Launched("EmbeddingKernel");
}

absl::Status RmsNorm(const float* x, const void* weight, DType dtype, int64_t n, int64_t dim, float eps, float* out,
                     cudaStream_t stream) {
  if (n == 0) return absl::OkStatus();
  RmsNormKernel<<<n, kThreads, 0, stream>>>(x, weight, dtype, dim, eps, out);
  return Launched("RmsNormKernel");
}

absl::Status Rope(float* x, int64_t rows, int64_t heads, int64_t head_dim, const int32_t* positions, const float* cos,
                  const float* sin, cudaStream_t stream) {
  if (rows == 0) return absl::OkStatus();
  RopeKernel<<<rows, kThreads, 0, stream>>>(x, heads, head_dim, positions, cos, sin);
  return Launched("RopeKernel");
}

absl::Status SwiGlu(float* gate, const float* up, int64_t count, cudaStream_t stream) {
  SwiGluKernel<<<Blocks(count), kThreads, 0, stream>>>(gate, up, count);
  return Launched("SwiGluKernel");
}

absl::Status AddInPlace(float* x, const float* y, int64_t count, cudaStream_t stream) {
  AddKernel<<<Blocks(count), kThreads, 0, stream>>>(x, y, count);
  return Launched("AddKernel");
}

absl::Status CastFromF32(const float* in, void* out, DType to, int64_t count, cudaStream_t stream) {
  if (to != DType::kBF16 && to != DType::kF16) {
    return absl::InvalidArgumentError(absl::StrFormat("CastFromF32 to %s: expected bf16 or f16", DTypeName(to)));
  }
  CastKernel<<<Blocks(count), kThreads, 0, stream>>>(in, out, to, count);
  return Launched("CastKernel");
}

namespace {

template <typename Kernel>
absl::Status ForCacheType(DType dtype, const char* what, Kernel&& kernel) {
  switch (dtype) {
    case DType::kF32:
      return kernel(float{});
    case DType::kF16:
      return kernel(__half{});
    case DType::kBF16:
      return kernel(__nv_bfloat16{});
    default:
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: a KV cache of %s; expected f32, bf16 or f16", what, DTypeName(dtype)));
  }
}

}  // namespace

absl::Status StoreKv(const float* k, const float* v, int64_t n, int64_t kv_width, const int32_t* slots,
                     const int32_t* positions, const KvCacheView& cache, cudaStream_t stream) {
  if (n == 0) return absl::OkStatus();
  return ForCacheType(cache.dtype, "StoreKv", [&](auto zero) {
    using T = decltype(zero);
    StoreKvKernel<T><<<n, kThreads, 0, stream>>>(k, v, kv_width, slots, positions, static_cast<T*>(cache.k),
                                                 static_cast<T*>(cache.v), cache.slot_stride);
    return Launched("StoreKvKernel");
  });
}

absl::Status Attention(const float* q, int64_t n, const int32_t* slots, const int32_t* positions,
                       const KvCacheView& cache, const int32_t* kv_head_of, int64_t n_heads, int64_t n_kv_heads,
                       int64_t head_dim, float* out, cudaStream_t stream) {
  if (n == 0) return absl::OkStatus();
  constexpr int kAttentionThreads = 128;  // 4 warps, each with a [head_dim] accumulator.
  const size_t shared = (kAttentionThreads / 32) * head_dim * sizeof(float);
  return ForCacheType(cache.dtype, "Attention", [&](auto zero) {
    using T = decltype(zero);
    AttentionKernel<T><<<n * n_heads, kAttentionThreads, shared, stream>>>(
        q, slots, positions, static_cast<const T*>(cache.k), static_cast<const T*>(cache.v), cache.slot_stride,
        kv_head_of, n_heads, n_kv_heads, head_dim, out);
    return Launched("AttentionKernel");
  });
}

absl::Status AttentionTiles(const float* q, const int32_t* tile_first, const int32_t* tile_rows, int64_t tiles,
                            const int32_t* slots, const int32_t* positions, const KvCacheView& cache,
                            const int32_t* kv_head_of, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                            float* out, cudaStream_t stream) {
  if (tiles == 0) return absl::OkStatus();
  if (head_dim > 32 * kMaxDimsPerLane) {
    return absl::InvalidArgumentError(
        absl::StrFormat("AttentionTiles: head_dim %d; at most %d", head_dim, 32 * kMaxDimsPerLane));
  }
  const size_t shared = (kAttentionTileRows + 2 * kKeyBlock) * (head_dim + 1) * sizeof(float);
  return ForCacheType(cache.dtype, "AttentionTiles", [&](auto zero) {
    using T = decltype(zero);
    AttentionTileKernel<T><<<dim3(tiles, n_heads), kTileThreads, shared, stream>>>(
        q, tile_first, tile_rows, slots, positions, static_cast<const T*>(cache.k), static_cast<const T*>(cache.v),
        cache.slot_stride, kv_head_of, n_heads, n_kv_heads, head_dim, out);
    return Launched("AttentionTileKernel");
  });
}

absl::Status GatherRows(const float* x, const int32_t* rows, int64_t count, int64_t width, float* out,
                        cudaStream_t stream) {
  if (count == 0) return absl::OkStatus();
  GatherRowsKernel<<<count, kThreads, 0, stream>>>(x, rows, width, out);
  return Launched("GatherRowsKernel");
}

absl::Status FlagNonFinite(const float* x, int64_t count, int32_t* flags, int index, cudaStream_t stream) {
  NonFiniteKernel<<<Blocks(count), kThreads, 0, stream>>>(x, count, flags + index);
  return Launched("NonFiniteKernel");
}

absl::Status SampleRows(const float* logits, int64_t rows, int64_t vocab, const RowSampling* params, float* probs,
                        int32_t* tokens, float* logprobs, cudaStream_t stream) {
  if (rows == 0) return absl::OkStatus();
  if (vocab > INT32_MAX) return absl::InvalidArgumentError(absl::StrFormat("SampleRows: vocabulary of %d", vocab));
  SampleKernel<<<rows, kSampleThreads, 0, stream>>>(logits, vocab, params, probs, tokens, logprobs);
  return Launched("SampleKernel");
}

}  // namespace llama::cuda
