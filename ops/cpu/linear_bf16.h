// Linear layers over packed bf16 weights with x rounded to bf16
// (LinearOptions::bf16_activations), as llama.cpp multiplies BF16 weights:
// each product of two bf16 values is exact in f32, so the only loss is x's
// rounding, and the CPU's bf16 dot product (AVX-512 BF16 vdpbf16ps) does
// two multiply-adds a lane per instruction, twice the f32 FMA's rate, on
// the panels as they are packed (two panel lines interleaved in
// registers). Without AVX-512 BF16, x rounded to bf16 goes through the f32
// kernels. Either way every row goes through one kernel whatever n is, so
// a row's outputs do not depend on its batch. Internal to ops/cpu.

#ifndef LLAMA_OPS_CPU_LINEAR_BF16_H_
#define LLAMA_OPS_CPU_LINEAR_BF16_H_

#include <cstdint>
#include <string_view>

#include "ops/tensor.h"

namespace llama::cpu {

// x [n, in] (in even) rounded to bf16 (nearest even) in pairs:
// pairs[r * in / 2 + j] = bf16(x[r][2j]) | bf16(x[r][2j + 1]) << 16.
void RoundToBf16Pairs(const float* x, int64_t n, int64_t in, uint32_t* pairs);

// "avx512bf16" where the CPU has the bf16 dot product, else "f32" (x
// rounded to bf16, then the f32 kernels).
std::string_view Bf16DotKernel();
// Tests: use the named kernel from now on, if this CPU runs it.
bool ForceBf16DotKernelForTesting(std::string_view name);

// Rows of x up to which Bf16DotPanels reads its panels in pairs
// (PanelsPerTask, panels.h): the sums of six rows times two panels and the
// four interleaved panel vectors are 28 of the 32 zmm registers.
inline constexpr int kBf16DotPairedRows = 6;

// With the "avx512bf16" kernel: y rows [0, n) for output panels
// [first, last) of a packed bf16 weight [out, in], from x's bf16 pairs.
void Bf16DotPanels(const uint32_t* pairs, int64_t n, int64_t in, const Tensor& w, int64_t first, int64_t last,
                   float* y);

}  // namespace llama::cpu

#endif  // LLAMA_OPS_CPU_LINEAR_BF16_H_
