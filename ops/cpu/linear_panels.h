// Linear layers over f32, bf16 and f16 weights packed in panels
// (panels.h): the prefill kernel (rows of x times a panel widened to f32)
// and the decode tiles (the 16-bit weights widened in registers), one
// instance per instruction set, picked once. Internal to //ops/cpu:linear;
// linear.h is the interface.

#ifndef LLAMA_OPS_CPU_LINEAR_PANELS_H_
#define LLAMA_OPS_CPU_LINEAR_PANELS_H_

#include <cstdint>
#include <string_view>

#include "ops/cpu/thread_pool.h"
#include "ops/tensor.h"

namespace llama::cpu {

// y[i, first + c] for every row i of x ([n, in]) and c < columns, from one
// packed panel widened to f32 ([in][kPanelWidth]); y is [n, out].
using PanelTimesXFn = void (*)(const float* x, int64_t n, int64_t in, const float* panel, int columns, float* y,
                               int64_t out, int64_t first);

// y = x w^T for a packed f32, bf16 or f16 `w` ([out, in]): the decode tiles
// up to the chosen instruction set's rows, the prefill kernel above.
void LinearPacked(const float* x, int64_t n, const Tensor& w, float* y, ThreadPool& pool);

// The chosen prefill kernel, which the block dtypes' widened panels take
// too (linear.cc), and its instruction set's name.
PanelTimesXFn PanelPrefillKernel();
std::string_view PanelKernelName();
bool ForcePanelKernelForTesting(std::string_view name);

}  // namespace llama::cpu

#endif  // LLAMA_OPS_CPU_LINEAR_PANELS_H_
