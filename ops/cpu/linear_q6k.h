// Linear layers over q6_k weights (llama.cpp's Q6_K, dtype.h): the
// kernels of kquant_linear.h's scheme. A 6-bit value q (0..63, its low
// four bits in ql, its top two in qh) stands for scale * (q - 32) with an
// int8 scale per 16 values; each super-block gives eight exact int32 lanes
// of scale times q times x (AVX-512 VNNI on 64-byte registers: vpmaddubsw
// then vpdpwssd; AVX2: vpmaddubsw, vpmaddwd, vpaddd; portable scalar
// code), less 32 times the scales times x's sums per 16, folded into the
// f32 lanes by one fused multiply-add each: all variants give the same
// bits (linear_q6k.cc says which lanes). A Q4_K_M file's output and half
// its attention-value and FFN-down matrices are Q6_K: kept, 6.56 bits a
// weight read at decode where int8 reads 8.5. Internal to ops/cpu.

#ifndef LLAMA_OPS_CPU_LINEAR_Q6K_H_
#define LLAMA_OPS_CPU_LINEAR_Q6K_H_

#include <cstdint>

#include "ops/cpu/kquant_linear.h"
#include "ops/cpu/linear.h"
#include "ops/cpu/thread_pool.h"
#include "ops/tensor.h"

namespace llama::cpu {

// A packed q6_k weight [out, in] (kquant::PackWeight) and its output
// y [n, out], for kquant::Linear (the kernel in use: Q6KKernel, linear.h).
kquant::Target Q6KTarget(const Tensor& w, float* y);

}  // namespace llama::cpu

#endif  // LLAMA_OPS_CPU_LINEAR_Q6K_H_
