// Linear layers over int8 (q8_0) weights. At load the weights are packed
// (PackQ8Weight): rows in groups of eight, each 32-byte load holding eight
// rows' next four weights, so that one vpdpbusd serves eight output rows
// and a load serves every row of x (the Q8_0 row order took a load, a sign
// and a scale per row and block). Decode: each row of x is quantized to
// int8 in blocks of 32 (its own f32 scale per block, as llama.cpp
// quantizes activations for Q8_0), and each weight block's 32 int8
// products are summed exactly in int32 before the two scales multiply the
// sum. Picked at run time: AVX-512 VNNI (vpdpbusd on ymm), AVX2
// (vpmaddubsw + vpmaddwd), or portable scalar code. Prefill widens groups
// into f32 panels (WidenQ8Panel). Internal to ops/cpu.

#ifndef LLAMA_OPS_CPU_LINEAR_Q8_H_
#define LLAMA_OPS_CPU_LINEAR_Q8_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "ops/cpu/thread_pool.h"
#include "ops/tensor.h"

namespace llama::cpu {

// A row-major q8_0 weight [out, in] (in % 32 == 0) in the packed layout,
// labelled TensorLayout::kLinearPanels, the same number of bytes as its
// rows padded to a multiple of eight.
absl::StatusOr<Tensor> PackQ8Weight(const Tensor& w, ThreadPool& pool);

// y [n, out] = x [n, in] * w^T for a packed q8_0 weight [out, in].
void LinearQ8(const float* x, int64_t n, const Tensor& w, float* y, ThreadPool& pool);

// "avx512vnni", "avx2" or "scalar": the kernel in use.
std::string_view Q8Kernel();

// Rows [32 * panel, 32 * panel + 32) of a packed q8_0 weight as an f32
// panel [in][32] (zeros past the last row), bit-identical to
// DequantizeQ8_0 of the rows: for the prefill kernels.
void WidenQ8Panel(const Tensor& w, int64_t panel, float* out);
// Tests: use the named kernel from now on, if this CPU runs it.
bool ForceQ8KernelForTesting(std::string_view name);

}  // namespace llama::cpu

#endif  // LLAMA_OPS_CPU_LINEAR_Q8_H_
