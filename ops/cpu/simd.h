// Eight-wide float vectors for the CPU kernels, through GCC's vector
// extension rather than intrinsics, so one source compiles for AVX2 and
// for baseline x86-64 (except the v3-only 16-bit loaders F16Hw and
// Bf16Hw); and the attribute that compiles a kernel twice.
// Internal to ops/cpu (included by .cc files only; also the bench's
// bandwidth probe).

#ifndef LLAMA_OPS_CPU_SIMD_H_
#define LLAMA_OPS_CPU_SIMD_H_

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "ops/cast.h"

namespace llama::cpu::simd {

// Kernels are compiled twice: for x86-64-v3 (AVX2, FMA, F16C) and for
// baseline x86-64, and each call goes to one or the other by UseV3(),
// decided once from the CPU. Explicit rather than GCC's target_clones so
// that tests can run the baseline versions on any host (ForceV3ForTesting).
// LLAMA_DISPATCH_V3 writes the three functions: name##V3 and
// name##Baseline from name##Impl (always_inline, so each is compiled
// whole for its target), and name choosing between them. Put it on a
// function that does a lot of work per call.
#define LLAMA_V3 __attribute__((target("arch=x86-64-v3")))
#define LLAMA_DISPATCH_V3(ret, name, params, args)                  \
  LLAMA_V3 ret name##V3 params { return name##Impl args; }          \
  ret name##Baseline params { return name##Impl args; }             \
  ret name params {                                                 \
    return ::llama::cpu::simd::UseV3() ? name##V3 args : name##Baseline args; \
  }

// Whether the kernels take their x86-64-v3 versions.
bool UseV3();
// Tests: run the v3 versions (if the CPU can) or the baseline ones; returns
// false, changing nothing, when the CPU cannot run v3.
bool ForceV3ForTesting(bool v3);
// The versions in use, "x86-64-v3" or "baseline", for test and bench output.
const char* KernelVersion();

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

// An IEEE f16 value as stored (weights, caches): a distinct type so that
// the kernels' overloads tell it from bf16, which is plain uint16_t.
struct F16 {
  uint16_t bits;
};

typedef int32_t Int32x8 __attribute__((vector_size(32)));

// Eight f16 values widened to f32 in registers with integer and float
// vector operations (F. Giesen's branch-free conversion: exponent rebias,
// infinities and NaNs kept, subnormals renormalised by a float subtract),
// bit-identical to ops/cast.h's F16ToF32 for every input. About a dozen
// vector instructions per eight weights: the baseline kernels' f16 (v3
// ones use F16Hw); GCC 12 compiles _Float16 vector conversions to eight
// scalar conversions instead.
__attribute__((always_inline)) inline Float8 Load8(const F16* p) {
  Uint16x8 half;
  std::memcpy(&half, p, sizeof half);
  const Uint32x8 h = __builtin_convertvector(half, Uint32x8);
  constexpr uint32_t kExponent = 0x7C00u << 13;  // The f16 exponent field, moved to f32's place.
  Uint32x8 bits = (h & 0x7FFFu) << 13;
  const Uint32x8 exponent = bits & kExponent;
  bits += (127u - 15u) << 23;
  // Vector comparisons give -1 (all bits) where true; a vector cast between
  // types of one size keeps the bits.
  const Int32x8 inf_or_nan = exponent == kExponent;
  bits += (Uint32x8)inf_or_nan & ((128u - 16u) << 23);
  const Uint32x8 subnormal = (Uint32x8)(exponent == 0u);
  const Float8 renormalised = (Float8)(bits + (1u << 23)) - 6.103515625e-05f;  // 2^-14, i.e. 113 << 23.
  bits = (bits & ~subnormal) | ((Uint32x8)renormalised & subnormal);
  bits |= (h & 0x8000u) << 16;
  return (Float8)bits;
}

// The same f16 values for code compiled for x86-64-v3 (functions with
// LLAMA_V3, called only where UseV3()): one vcvtph2ps per eight, as
// fast as bf16's shift. A separate type, since the instruction cannot be
// in the baseline clone of a multiversioned function. Not always_inline:
// the templates that load it are compiled before they are inlined into a
// LLAMA_V3 function, where this is inlined in turn (checked in the object
// code: no call remains).
struct F16Hw {
  uint16_t bits;
};
__attribute__((target("avx,f16c"))) inline Float8 Load8(const F16Hw* p) {
  const __m256 wide = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  Float8 v;
  std::memcpy(&v, &wide, sizeof v);
  return v;
}

// bf16 for code compiled for x86-64-v3, like F16Hw: one vpmovzxwd from
// memory and a shift per eight weights, where GCC lowers the generic
// Load8(const uint16_t*) to five instructions.
struct Bf16Hw {
  uint16_t bits;
};
__attribute__((target("avx2"))) inline Float8 Load8(const Bf16Hw* p) {
  const __m256i wide =
      _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16);
  Float8 v;
  std::memcpy(&v, &wide, sizeof v);
  return v;
}

__attribute__((always_inline)) inline void Store8(float* p, Float8 v) { std::memcpy(p, &v, sizeof v); }

__attribute__((always_inline)) inline float Sum(Float8 p) {
  return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
}

// Sum of each of a, b, c and d, in lanes 0-3, every one added in Sum's
// order (so the same bits), the four reductions sharing their shuffles and
// adds: three pairwise steps for four vectors instead of one for each.
__attribute__((always_inline)) inline Float8 Sum4(Float8 a, Float8 b, Float8 c, Float8 d) {
  const Int32x8 even = {0, 2, 8, 10, 4, 6, 12, 14}, odd = {1, 3, 9, 11, 5, 7, 13, 15};
  // [a0+a1, a2+a3, b0+b1, b2+b3, a4+a5, a6+a7, b4+b5, b6+b7], and c, d alike.
  const Float8 ab = __builtin_shuffle(a, b, even) + __builtin_shuffle(a, b, odd);
  const Float8 cd = __builtin_shuffle(c, d, even) + __builtin_shuffle(c, d, odd);
  // [(a0+a1)+(a2+a3), b, c, d of the low halves, then of the high halves].
  const Float8 halves = __builtin_shuffle(ab, cd, even) + __builtin_shuffle(ab, cd, odd);
  const Int32x8 high = {4, 5, 6, 7, 4, 5, 6, 7}, low = {0, 1, 2, 3, 0, 1, 2, 3};
  return __builtin_shuffle(halves, low) + __builtin_shuffle(halves, high);
}

// x rounded to int8 for the integer kernels, as ops/quantize.h's
// QuantizeBlock does it (its bits exactly, for finite values), eight at a
// time: the calling thread quantizes x while the pool's workers wait, and
// std::lround a value at a time was 3% of a Q4_K_M decode step.
typedef int8_t Int8x8 __attribute__((vector_size(8)));

// max |v[i]| over n values (a multiple of 8): non-negative floats order as
// their bits do.
__attribute__((always_inline)) inline float AbsMax(const float* v, int n) {
  Int32x8 magnitudes = {};
  for (int i = 0; i < n; i += 8) {
    Int32x8 bits;
    std::memcpy(&bits, v + i, sizeof bits);
    bits &= 0x7FFFFFFF;
    magnitudes = magnitudes > bits ? magnitudes : bits;
  }
  int32_t largest = 0;
  for (int k = 0; k < 8; ++k) largest = largest > magnitudes[k] ? largest : magnitudes[k];
  float amax;
  std::memcpy(&amax, &largest, sizeof amax);
  return amax;
}

// std::lround(v[0..8) * id), exactly: truncated, then a step away from zero
// where the (exact) remainder reaches a half, which is how lround breaks
// ties. (Adding a half and truncating is off by one at 0.49999997.)
__attribute__((always_inline)) inline Int32x8 RoundScaled8(const float* v, float id) {
  const Float8 r = Load8(v) * id;
  const Int32x8 t = __builtin_convertvector(r, Int32x8);
  const Float8 rest = r - __builtin_convertvector(t, Float8);
  return t - (rest >= 0.5f) + (rest <= -0.5f);  // A true comparison is -1.
}

// Asks for the `bytes` at p + ahead into the caches, a line at a time. The
// address may lie past the end of p's memory (a prefetch never faults), so
// it is computed as an integer: pointer arithmetic there would be undefined.
__attribute__((always_inline)) inline void PrefetchAhead(const void* p, int64_t ahead, int64_t bytes) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(ahead);
  for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(reinterpret_cast<const void*>(at + b));
}

// The int8 values of RoundScaled8 (|v * id| <= 127 in the quantizers).
__attribute__((always_inline)) inline Int8x8 Narrow(Int32x8 v) { return __builtin_convertvector(v, Int8x8); }

// e^x of eight floats, within 2 ulp of the exact value for x in [-87, 88]
// (Cephes's expf: x = n ln 2 + r with |r| <= ln 2 / 2, a degree-6
// polynomial for e^r, n added to the exponent field); 0 below -87, where e^x
// is under 1.7e-38 (the softmax's weights), and +inf above 88.7. Written with
// vector extensions, so the baseline and v3 versions of a kernel share it;
// the softmax calling std::expf once per score was a third of a long
// prompt's attention.
__attribute__((always_inline)) inline Float8 Exp(Float8 x) {
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer, kept in the low bits.
  const Float8 n_biased = x * 1.44269504088896341f + kRound;
  const Float8 n = n_biased - kRound;
  const Float8 r = (x - n * 0.693359375f) - n * -2.12194440e-4f;  // ln 2 in two parts: r is exact.
  Float8 p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const Float8 y = (p * r) * r + r + 1.0f;
  Uint32x8 bits, n_bits;
  std::memcpy(&bits, &y, sizeof bits);
  std::memcpy(&n_bits, &n_biased, sizeof n_bits);
  bits += (n_bits - 0x4B400000u) << 23;  // y * 2^n; unsigned, so a negative n wraps to the same bits.
  Float8 e;
  std::memcpy(&e, &bits, sizeof e);
  const Float8 zero = {}, inf = zero + __builtin_inff();
  e = x < -87.0f ? zero : e;
  return x > 88.7f ? inf : e;
}

__attribute__((always_inline)) inline float Scalar(float v) { return v; }
__attribute__((always_inline)) inline float Scalar(uint16_t v) { return Bf16ToF32(v); }
__attribute__((always_inline)) inline float Scalar(F16 v) { return F16ToF32(v.bits); }
__attribute__((always_inline)) inline float Scalar(F16Hw v) { return F16ToF32(v.bits); }
__attribute__((always_inline)) inline float Scalar(Bf16Hw v) { return Bf16ToF32(v.bits); }

// Sixteen floats in one vector: a zmm register, for AVX-512 code only.
typedef float Float16 __attribute__((vector_size(64)));

// Sixteen weights widened into a zmm for the AVX-512 tiles: one vpmovzxwd
// and one shift (bf16) or one vcvtph2ps (f16), where pairs of eight took
// twice the shuffle-port work plus a lane insert (batch-8 decode of the
// bench model, bf16: 149-162 -> see PERFORMANCE.md).
// (GCC 12's own avx512fintrin.h trips -Wmaybe-uninitialized on these two
// conversions' unused pass-through operand.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f"))) inline Float16 Load16(const Bf16Hw* p) {
  const __m512i wide =
      _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16);
  Float16 v;
  std::memcpy(&v, &wide, sizeof v);
  return v;
}
__attribute__((target("avx512f"))) inline Float16 Load16(const F16Hw* p) {
  const __m512 wide = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  Float16 v;
  std::memcpy(&v, &wide, sizeof v);
  return v;
}
#pragma GCC diagnostic pop
__attribute__((always_inline)) inline Float16 Load16(const float* p) {
  Float16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace llama::cpu::simd

#endif  // LLAMA_OPS_CPU_SIMD_H_
