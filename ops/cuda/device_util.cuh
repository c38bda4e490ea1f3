// Device helpers shared by the kernels of ops/cuda/ (nvcc only): loads
// and stores in any float dtype, warp and block reductions, launch sizing
// and launch status, and dispatch on the KV cache's element type.

#ifndef LLAMA_OPS_CUDA_DEVICE_UTIL_CUH_
#define LLAMA_OPS_CUDA_DEVICE_UTIL_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "ops/dtype.h"

namespace llama::cuda {

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

inline int Blocks(int64_t count) {
  const int64_t wanted = (count + kThreads - 1) / kThreads;
  return static_cast<int>(wanted < 65535 ? (wanted > 0 ? wanted : 1) : 65535);
}

inline absl::Status Launched(const char* kernel) {
  const cudaError_t code = cudaGetLastError();
  if (code == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrFormat("%s launch failed: %s", kernel, cudaGetErrorString(code)));
}


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

}  // namespace llama::cuda

#endif  // LLAMA_OPS_CUDA_DEVICE_UTIL_CUH_
