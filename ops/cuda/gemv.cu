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

// The group as the kernel sees it: weight g owns blocks [block_end[g - 1],
// block_end[g]).
struct GemvGroup {
  const void* w[kMaxGemvGroup];
  float* y[kMaxGemvGroup];
  int64_t out[kMaxGemvGroup];
  int64_t block_end[kMaxGemvGroup];
  int count;
};

template <typename T>
__global__ void __launch_bounds__(kGemvWarps * 32)
    GemvKernel(const float* __restrict__ x, const GemvGroup group, int64_t in) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // This block's weight, picked with constant indices only: indexing the
  // parameter struct with a variable copies it to every thread's stack (104
  // bytes a thread, which made the 7B decode step 1.4 ms slower on an H200).
  int64_t first_block = 0, out = group.out[0];
  const void* w = group.w[0];
  float* y = group.y[0];
#pragma unroll
  for (int g = 1; g < kMaxGemvGroup; ++g) {
    if (g < group.count && blockIdx.x >= group.block_end[g - 1]) {
      first_block = group.block_end[g - 1];
      out = group.out[g];
      w = group.w[g];
      y = group.y[g];
    }
  }
  const int64_t o = (static_cast<int64_t>(blockIdx.x) - first_block) * kGemvWarps + warp;
  if (o >= out) return;
  const T* __restrict__ row = static_cast<const T*>(w) + o * in;
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

}  // namespace

bool GemvTakes(int64_t n, DType dtype, int64_t in) {
  return n == 1 && (dtype == DType::kBF16 || dtype == DType::kF16) && in % 8 == 0;
}

absl::Status Gemv(const float* x, int64_t n, DType dtype, int64_t in, absl::Span<const LinearOutput> outputs,
                  cudaStream_t stream) {
  if (!GemvTakes(n, dtype, in) || outputs.empty() || outputs.size() > kMaxGemvGroup) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "Gemv: %d rows of %s weights with in = %d, %d weights; expected 1 row, bf16 or f16, in a multiple of 8, "
        "1 to %d weights",
        n, DTypeName(dtype), in, outputs.size(), kMaxGemvGroup));
  }
  GemvGroup group{};
  group.count = static_cast<int>(outputs.size());
  int64_t blocks = 0;
  for (int g = 0; g < group.count; ++g) {
    group.w[g] = outputs[g].w;
    group.y[g] = outputs[g].y;
    group.out[g] = outputs[g].out;
    blocks += (outputs[g].out + kGemvWarps - 1) / kGemvWarps;
    group.block_end[g] = blocks;
  }
  if (dtype == DType::kBF16) {
    GemvKernel<__nv_bfloat16><<<blocks, kGemvWarps * 32, 0, stream>>>(x, group, in);
  } else {
    GemvKernel<__half><<<blocks, kGemvWarps * 32, 0, stream>>>(x, group, in);
  }
  return Launched("GemvKernel");
}

}  // namespace llama::cuda
