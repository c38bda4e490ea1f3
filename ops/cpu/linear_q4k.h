// Linear layers over q4_k weights (llama.cpp's Q4_K, dtype.h): the
// kernels of kquant_linear.h's scheme. Each super-block gives eight exact
// int32 lanes of scale times nibbles times x (AVX-512 VNNI on 64-byte
// registers: vpmaddubsw then vpdpwssd; AVX2: vpmaddubsw, vpmaddwd, vpaddd;
// portable scalar code), and the minimums times x's sums per 32 apart;
// both fold into the f32 lanes with the same fused multiply-adds, in
// registers until the row ends, so all variants give the same bits
// (linear_q4k.cc says which lanes). Internal to ops/cpu.

#ifndef LLAMA_OPS_CPU_LINEAR_Q4K_H_
#define LLAMA_OPS_CPU_LINEAR_Q4K_H_

#include <cstdint>

#include "ops/cpu/kquant_linear.h"
#include "ops/cpu/linear.h"
#include "ops/cpu/thread_pool.h"
#include "ops/tensor.h"

namespace llama::cpu {

// A packed q4_k weight [out, in] (kquant::PackWeight) and its output
// y [n, out], for kquant::Linear (the kernel in use: Q4KKernel, linear.h).
kquant::Target Q4KTarget(const Tensor& w, float* y);

}  // namespace llama::cpu

#endif  // LLAMA_OPS_CPU_LINEAR_Q4K_H_
