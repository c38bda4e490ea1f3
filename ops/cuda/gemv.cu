// See gemv.h.

#include "ops/cuda/gemv.h"

#include "ops/cuda/device_util.cuh"

namespace llama::cuda {
namespace {

constexpr int kGemvWarps = 8;  // Output rows per block.

// Eight 16-bit weights (one 16-byte load) as floats.
__device__ __forceinline__ void Widen(const uint4& packed, __nv_bfloat16, float* w) {
  const uint32_t words[4] = {packed.x, packed.y, packed.z, packed.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    w[2 * i] = __uint_as_float(words[i] << 16);
    w[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
  }
}

__device__ __forceinline__ void Widen(const uint4& packed, __half, float* w) {
  const __half2* halves = reinterpret_cast<const __half2*>(&packed);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 pair = __half22float2(halves[i]);
    w[2 * i] = pair.x;
    w[2 * i + 1] = pair.y;
  }
}

template <typename T>
__global__ void __launch_bounds__(kGemvWarps * 32)
    GemvKernel(const float* __restrict__ x, const T* __restrict__ w, int64_t out, int64_t in, float* __restrict__ y) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t o = static_cast<int64_t>(blockIdx.x) * kGemvWarps + warp;
  if (o >= out) return;
  const T* row = w + o * in;
  float acc = 0.0f;
#pragma unroll 4
  for (int64_t k = lane * 8; k < in; k += 32 * 8) {
    float weights[8];
    Widen(__ldg(reinterpret_cast<const uint4*>(row + k)), T{}, weights);
    const float4 a = *reinterpret_cast<const float4*>(x + k);
    const float4 b = *reinterpret_cast<const float4*>(x + k + 4);
    acc += weights[0] * a.x + weights[1] * a.y + weights[2] * a.z + weights[3] * a.w + weights[4] * b.x +
           weights[5] * b.y + weights[6] * b.z + weights[7] * b.w;
  }
  acc = WarpSum(acc);
  if (lane == 0) y[o] = acc;
}

template <typename T>
absl::Status Launch(const float* x, const void* w, int64_t out, int64_t in, float* y, cudaStream_t stream) {
  const int64_t blocks = (out + kGemvWarps - 1) / kGemvWarps;
  GemvKernel<T><<<blocks, kGemvWarps * 32, 0, stream>>>(x, static_cast<const T*>(w), out, in, y);
  return Launched("GemvKernel");
}

}  // namespace

bool GemvTakes(int64_t n, DType dtype, int64_t in) {
  return n == 1 && (dtype == DType::kBF16 || dtype == DType::kF16) && in % 8 == 0;
}

absl::Status Gemv(const float* x, int64_t n, const void* w, DType dtype, int64_t out, int64_t in, float* y,
                  cudaStream_t stream) {
  if (!GemvTakes(n, dtype, in)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "Gemv: %d rows of %s weights with in = %d; expected 1 row, bf16 or f16, in a multiple of 8", n,
        DTypeName(dtype), in));
  }
  if (dtype == DType::kBF16) return Launch<__nv_bfloat16>(x, w, out, in, y, stream);
  return Launch<__half>(x, w, out, in, y, stream);
}

}  // namespace llama::cuda
