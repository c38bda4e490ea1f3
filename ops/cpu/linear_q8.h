// Decode-time linear layers over int8 (q8_0) weights, with integer dot
// products: each row of x is quantized to int8 in blocks of 32 (its own
// f32 scale per block, as llama.cpp quantizes activations for Q8_0), and
// each weight block's 32 int8 products are summed exactly in int32 before
// the two scales multiply the sum. Picked at run time: AVX-512 VNNI
// (vpdpbusd on ymm), AVX2 (vpmaddubsw + vpmaddwd), or portable scalar code.
// Internal to ops/cpu (Linear calls it for q8_0 weights and few rows).

#ifndef LLAMA_OPS_CPU_LINEAR_Q8_H_
#define LLAMA_OPS_CPU_LINEAR_Q8_H_

#include <cstdint>
#include <string_view>

#include "ops/cpu/thread_pool.h"
#include "ops/tensor.h"

namespace llama::cpu {

// y [n, out] = x [n, in] * w^T for a q8_0 weight [out, in] (in % 32 == 0).
void LinearQ8(const float* x, int64_t n, const Tensor& w, float* y, ThreadPool& pool);

// "avx512vnni", "avx2" or "scalar": the kernel in use.
std::string_view Q8Kernel();

// DequantizeQ8_0 (ops/quantize.h), vectorized where the CPU has AVX2 and
// bit-identical: for the f32 panels that prefill widens q8_0 weights into.
void DequantizeQ8Rows(const uint8_t* blocks, int64_t n, float* out);
// Tests: use the named kernel from now on, if this CPU runs it.
bool ForceQ8KernelForTesting(std::string_view name);

}  // namespace llama::cpu

#endif  // LLAMA_OPS_CPU_LINEAR_Q8_H_
