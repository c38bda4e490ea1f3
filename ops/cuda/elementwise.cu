// Row-wise and element-wise kernels: one block per row, grid-stride loops.

#include "ops/cuda/elementwise.h"

#include "ops/cuda/device_util.cuh"

namespace llama::cuda {
namespace {

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

}  // namespace llama::cuda
