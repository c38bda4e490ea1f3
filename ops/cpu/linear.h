// y = x W^T for activations x [n, in] (f32) and a weight W [out, in] in
// f32, f16 or bf16, accumulating in f32: every linear layer of the model.
//
// Memory-bound at decode (n = batch): each weight row is read once per call
// and upcast into a small per-thread buffer, then dotted with every row of
// x while it sits in cache. Threads split the output features.

#ifndef LLAMA_OPS_CPU_LINEAR_H_
#define LLAMA_OPS_CPU_LINEAR_H_

#include <cstdint>

#include "ops/cpu/thread_pool.h"
#include "ops/tensor.h"

namespace llama::cpu {

// y [n, out] = x [n, in] * w^T; w is [out, in].
void Linear(const float* x, int64_t n, const Tensor& w, float* y, ThreadPool& pool);

}  // namespace llama::cpu

#endif  // LLAMA_OPS_CPU_LINEAR_H_
