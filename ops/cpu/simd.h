// Eight-wide float vectors for the CPU kernels, through GCC's vector
// extension rather than intrinsics, so one source compiles for AVX2 and
// for baseline x86-64; and the attribute that compiles a kernel twice.
// Internal to ops/cpu (included by .cc files only).

#ifndef LLAMA_OPS_CPU_SIMD_H_
#define LLAMA_OPS_CPU_SIMD_H_

#include <cstdint>
#include <cstring>

#include "ops/cast.h"

namespace llama::cpu::simd {

// Compiled twice (GCC function multiversioning): for AVX2+FMA and for
// baseline x86-64, chosen once at load time by the CPU, so a binary runs on
// any x86-64 while using 8-wide FMAs where it can. Put it on a function
// that does a lot of work per call: the choice costs an indirect call.
#define LLAMA_MULTIVERSION __attribute__((target_clones("arch=x86-64-v3", "default")))

// Eight floats in one vector: a ymm register on AVX2, two xmm registers on
// baseline x86-64. Its helpers are always inlined, so the ABI note GCC
// gives for passing it by value does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float Float8 __attribute__((vector_size(32)));
typedef uint16_t Uint16x8 __attribute__((vector_size(16)));
typedef uint32_t Uint32x8 __attribute__((vector_size(32)));

__attribute__((always_inline)) inline Float8 Load8(const float* p) {
  Float8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Eight bf16 values widened to f32 in registers (bf16 is the top half of an
// f32), so a bf16 weight or cache row is read once, at two bytes.
__attribute__((always_inline)) inline Float8 Load8(const uint16_t* p) {
  Uint16x8 half;
  std::memcpy(&half, p, sizeof half);
  const Uint32x8 wide = __builtin_convertvector(half, Uint32x8) << 16;
  Float8 v;
  std::memcpy(&v, &wide, sizeof v);
  return v;
}

__attribute__((always_inline)) inline void Store8(float* p, Float8 v) { std::memcpy(p, &v, sizeof v); }

__attribute__((always_inline)) inline float Sum(Float8 p) {
  return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
}

__attribute__((always_inline)) inline float Scalar(float v) { return v; }
__attribute__((always_inline)) inline float Scalar(uint16_t v) { return Bf16ToF32(v); }

}  // namespace llama::cpu::simd

#endif  // LLAMA_OPS_CPU_SIMD_H_
