// Straightforward kernels: one block per row (or per row and head), warp
// shuffles for reductions. Correct first; the GPU check script's parity
// tests guard them, and faster versions replace them behind the same
// launchers.

#include "ops/cuda/kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cfloat>

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

// One block per (row, head). The scores are not kept (their number grows
// with the context): one pass finds the maximum, a second accumulates the
// exponentials and the weighted values, recomputing the dot products.
__global__ void AttentionKernel(const float* q, const float* k_cache, const float* v_cache, const int32_t* kv_head_of,
                                int64_t start_pos, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float* out) {
  const int64_t row = blockIdx.x / n_heads, head = blockIdx.x % n_heads;
  const int64_t pos = start_pos + row;
  const float* qv = q + (row * n_heads + head) * head_dim;
  const int64_t kv = kv_head_of[head];
  const int64_t stride = n_kv_heads * head_dim;
  const float scale = rsqrtf(static_cast<float>(head_dim));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  // Each warp takes positions t = warp, warp + warps, ...; lanes split the head dimension.
  float local_max = -FLT_MAX;
  for (int64_t t = warp; t <= pos; t += warps) {
    const float* k = k_cache + t * stride + kv * head_dim;
    float dot = 0.0f;
    for (int64_t d = lane; d < head_dim; d += 32) dot += qv[d] * k[d];
    local_max = fmaxf(local_max, WarpSum(dot) * scale);
  }
  const float max_score = BlockReduce<true>(local_max);
  extern __shared__ float accumulators[];  // [warps, head_dim]
  float* acc = accumulators + warp * head_dim;
  for (int64_t d = lane; d < head_dim; d += 32) acc[d] = 0.0f;
  float local_sum = 0.0f;
  for (int64_t t = warp; t <= pos; t += warps) {
    const float* k = k_cache + t * stride + kv * head_dim;
    const float* v = v_cache + t * stride + kv * head_dim;
    float dot = 0.0f;
    for (int64_t d = lane; d < head_dim; d += 32) dot += qv[d] * k[d];
    const float weight = __expf(WarpSum(dot) * scale - max_score);
    local_sum += weight;
    for (int64_t d = lane; d < head_dim; d += 32) acc[d] += weight * v[d];
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

__global__ void NonFiniteKernel(const float* x, int64_t count, int32_t* flag) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    if (!isfinite(x[i])) {
      *flag = 1;
      return;
    }
  }
}

__global__ void ArgmaxKernel(const float* logits, int64_t vocab, int32_t* out) {
  const float* row = logits + blockIdx.x * vocab;
  float best = -FLT_MAX;
  int64_t index = 0;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    if (row[i] > best) {
      best = row[i];
      index = i;
    }
  }
  __shared__ float values[kThreads];
  __shared__ int64_t indices[kThreads];
  values[threadIdx.x] = best;
  indices[threadIdx.x] = index;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      const float other = values[threadIdx.x + stride];
      const int64_t other_index = indices[threadIdx.x + stride];
      // The first maximum wins, as on the CPU.
      if (other > values[threadIdx.x] || (other == values[threadIdx.x] && other_index < indices[threadIdx.x])) {
        values[threadIdx.x] = other;
        indices[threadIdx.x] = other_index;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = static_cast<int32_t>(indices[0]);
}

__global__ void LogProbKernel(const float* logits, int64_t vocab, const int32_t* tokens, float* out) {
  const float* row = logits + blockIdx.x * vocab;
  float m = -FLT_MAX;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) m = fmaxf(m, row[i]);
  m = BlockReduce<true>(m);
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) sum += __expf(row[i] - m);
  sum = BlockReduce<false>(sum);
  if (threadIdx.x == 0) out[blockIdx.x] = row[tokens[blockIdx.x]] - m - logf(sum);
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

absl::Status Attention(const float* q, const float* k_cache, const float* v_cache, const int32_t* kv_head_of,
                       int64_t start_pos, int64_t len, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                       float* out, cudaStream_t stream) {
  if (len == 0) return absl::OkStatus();
  constexpr int kAttentionThreads = 128;  // 4 warps, each with a [head_dim] accumulator.
  const size_t shared = (kAttentionThreads / 32) * head_dim * sizeof(float);
  AttentionKernel<<<len * n_heads, kAttentionThreads, shared, stream>>>(q, k_cache, v_cache, kv_head_of, start_pos,
                                                                       n_heads, n_kv_heads, head_dim, out);
  return Launched("AttentionKernel");
}

absl::Status FlagNonFinite(const float* x, int64_t count, int32_t* flags, int index, cudaStream_t stream) {
  NonFiniteKernel<<<Blocks(count), kThreads, 0, stream>>>(x, count, flags + index);
  return Launched("NonFiniteKernel");
}

absl::Status ArgmaxRows(const float* logits, int64_t rows, int64_t vocab, int32_t* out, cudaStream_t stream) {
  if (rows == 0) return absl::OkStatus();
  ArgmaxKernel<<<rows, kThreads, 0, stream>>>(logits, vocab, out);
  return Launched("ArgmaxKernel");
}

absl::Status LogProbRows(const float* logits, int64_t rows, int64_t vocab, const int32_t* tokens, float* out,
                         cudaStream_t stream) {
  if (rows == 0) return absl::OkStatus();
  LogProbKernel<<<rows, kThreads, 0, stream>>>(logits, vocab, tokens, out);
  return Launched("LogProbKernel");
}

}  // namespace llama::cuda
