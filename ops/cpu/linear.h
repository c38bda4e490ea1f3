// y = x W^T for activations x [n, in] (f32) and a weight W [out, in] in
// f32, f16, bf16 or q8_0, accumulating in f32: every linear layer of the
// model. q8_0 weights at decode take integer dot products (linear_q8.h);
// at prefill they are widened into the f32 panels like 16-bit ones.
//
// Memory-bound at decode (n = batch, up to 12): each weight row is read once
// per call (bf16 widened in registers) and dotted with every row of x while
// it sits in cache. Compute-bound at prefill (more rows): weight rows are
// packed, 32 at a time, into a transposed f32 panel and multiplied into
// register tiles of y with the widest vectors the CPU has. Threads split the
// output features.

#ifndef LLAMA_OPS_CPU_LINEAR_H_
#define LLAMA_OPS_CPU_LINEAR_H_

#include <cstdint>
#include <string_view>

#include "ops/cpu/thread_pool.h"
#include "ops/tensor.h"

namespace llama::cpu {

// y [n, out] = x [n, in] * w^T; w is [out, in].
void Linear(const float* x, int64_t n, const Tensor& w, float* y, ThreadPool& pool);

// The prefill kernel in use: "avx512", "avx2" or "baseline", the widest
// this CPU runs.
std::string_view PrefillKernel();

// Tests: use the named prefill kernel from now on, if this CPU runs it.
bool ForcePrefillKernelForTesting(std::string_view name);

// The int8 (q8_0) decode kernel in use: "avx512vnni", "avx2" or "scalar".
std::string_view Int8Kernel();
// Tests: use the named int8 kernel from now on, if this CPU runs it.
bool ForceInt8KernelForTesting(std::string_view name);

}  // namespace llama::cpu

#endif  // LLAMA_OPS_CPU_LINEAR_H_
