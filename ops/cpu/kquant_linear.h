// What the K-quant linear layers (linear_q4k.h, linear_q6k.h: llama.cpp's
// Q4_K and Q6_K, super-blocks of 256 along a row) share: weights kept in
// their stored row order; at decode, x quantized once per call to int8 per
// super-block with an f32 scale (llama.cpp's Q8_K choice: one scale per
// super-block lets the weights' sub-block scales multiply in integers), and
// a kernel per instruction set giving each row's outputs from eight f32
// lanes that every variant fills with the same operations; at prefill,
// rows decoded 32 at a time into f32 panels. Internal to ops/cpu.
//
// The vector kernels ask for the weights WeightPrefetchBytes() ahead
// (linear.h: on Intel CPUs 2 KB, elsewhere none, measured there).

#ifndef LLAMA_OPS_CPU_KQUANT_LINEAR_H_
#define LLAMA_OPS_CPU_KQUANT_LINEAR_H_

#include <immintrin.h>

#include <array>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ops/cpu/kernel_dispatch.h"
#include "ops/cpu/linear.h"
#include "ops/cpu/thread_pool.h"
#include "ops/tensor.h"

namespace llama::cpu::kquant {

constexpr int64_t kSuperBlock = 256;
// f32 accumulators per row of x: one 32-byte register of them.
constexpr int kLanes = 8;
// Rows of x a kernel takes against each weight row. 16: the AVX-512 q4_k
// kernel's fixed work per super-block (unpacking the nibbles and scales)
// then serves twice the rows, and 16 rows of x (32 KB at the TinyLlama
// shape's 2048 columns) still stay in L1 as the weight rows pass: its
// 512-token prefill went 122-125 -> 128-131 tokens/s (32 rows: 115).
constexpr int kMaxRows = 16;
static_assert(kMaxRows == 16, "LLAMA_KQUANT_ROW_KERNELS lists 16 kernels");

// One row of x, quantized: per super-block b, values q[256 b ...] (in the
// kernel's order, Placement), scale d[b], and the sums of q over each run
// of Placement::sum_width values in x's order.
struct QuantizedRow {
  const int8_t* q;
  const float* d;
  const int16_t* sums;
};

// Where a super-block's 32-value sub-block s of x is stored (offsets[s]),
// and how many values each sum covers (16 or 32).
struct Placement {
  std::array<int16_t, 8> offsets;
  int sum_width;
};

// y[r * stride + o] for the kRows rows of x against `count` weight rows of
// `blocks` super-blocks, the first at `rows`, `row_bytes` apart.
using RowDotsFn = void (*)(const QuantizedRow* x, const uint8_t* rows, int64_t row_bytes, int64_t count,
                           int64_t blocks, float* y, int64_t stride);
// A variant's kernels, [rows - 1].
using RowDots = std::array<RowDotsFn, kMaxRows>;

// Defines name##Rows<kRows>, a RowDotsFn: name<kRows> (one weight row,
// always_inline, of the same target) over `count` rows, compiled with
// `attributes` so that each row's body is inlined and its constants stay
// in registers from row to row (a call a row rebuilt them, stored and
// summed the lanes through the stack, for 8 super-blocks of work). The
// prefetch distance is read once here and passed down, so that no call is
// left inside the rows' loop. More rows than `pass`, the most whose
// accumulators stay in the variant's registers, go over the weights in
// passes of `pass` rows (AVX2's 16 registers hold 4 rows' accumulators:
// with all 8 at once they spilled, and batch-8 decode took 83.1/84.1
// against 76.8/77.8 ms/step on the TinyLlama shape's Q4_K_M). Each row's
// outputs are the same bits either way.
#define LLAMA_KQUANT_ROWS(attributes, name, pass)                                                                \
  template <int kRows>                                                                                           \
  attributes void name##Rows(const QuantizedRow* x, const uint8_t* rows, int64_t row_bytes, int64_t count,       \
                             int64_t blocks, float* y, int64_t stride) {                                         \
    if constexpr (kRows > (pass)) {                                                                              \
      name##Rows<(pass)>(x, rows, row_bytes, count, blocks, y, stride);                                          \
      name##Rows<kRows - (pass)>(x + (pass), rows, row_bytes, count, blocks, y + (pass) * stride, stride);       \
    } else {                                                                                                     \
      const int64_t ahead = ::llama::cpu::WeightPrefetchBytes();                                                 \
      for (int64_t o = 0; o < count; ++o) name<kRows>(x, rows + o * row_bytes, blocks, ahead, y + o, stride);    \
    }                                                                                                            \
  }

// A variant's RowDots: name<1> ... name<16>.
#define LLAMA_KQUANT_ROW_KERNELS(name)                                                                             \
  {{name<1>, name<2>, name<3>, name<4>, name<5>, name<6>, name<7>, name<8>, name<9>, name<10>, name<11>, name<12>, \
    name<13>, name<14>, name<15>, name<16>}}

// The target of the AVX-512 variants.
#define LLAMA_KQUANT_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))

// A K-quant type's kernel versions and ChosenKernels(), the best one this
// CPU runs, written once for every type: from the per-row kernels
// RowDotsScalar and RowDotsAvx2 (templates on kRows) of the type's file, in
// its anonymous namespace, and its RowDotsAvx512VnniRows (a type defines it
// with LLAMA_KQUANT_ROWS(LLAMA_KQUANT_AVX512, RowDotsAvx512Vnni, pass), or
// with work of its own shared by the weight rows).
#define LLAMA_KQUANT_KERNELS()                                                                                 \
  LLAMA_KQUANT_ROWS(, RowDotsScalar, ::llama::cpu::kquant::kMaxRows)                                           \
  LLAMA_KQUANT_ROWS(__attribute__((target("avx2,fma,f16c"))), RowDotsAvx2, 4)                                  \
  ::llama::cpu::KernelDispatch<::llama::cpu::kquant::RowDots, 3>& ChosenKernels() {                            \
    static ::llama::cpu::KernelDispatch<::llama::cpu::kquant::RowDots, 3> kernels({{                           \
        {"avx512vnni", ::llama::cpu::CpuRunsAvx512BwVnni, LLAMA_KQUANT_ROW_KERNELS(RowDotsAvx512VnniRows)},    \
        {"avx2", ::llama::cpu::CpuRunsAvx2FmaF16c, LLAMA_KQUANT_ROW_KERNELS(RowDotsAvx2Rows)},                 \
        {"scalar", ::llama::cpu::AnyX86_64, LLAMA_KQUANT_ROW_KERNELS(RowDotsScalarRows)},                      \
    }});                                                                                                       \
    return kernels;                                                                                            \
  }

// A row-major weight [out, in] of a K-quant dtype (in % 256 == 0) copied
// into owned storage, rows as they are, labelled TensorLayout::kLinearPanels.
absl::StatusOr<Tensor> PackWeight(const Tensor& w);

// One packed K-quant weight, its output, and its type's x order and kernels
// (Q4KTarget, Q6KTarget).
struct Target {
  const Tensor* weight;
  const Placement* placement;
  const RowDots* kernels;
  float* y;
};

// y [n, out] = x [n, in] * w^T for every target (weights of one `in`): x
// quantized once per placement, and all the targets' rows in one pass of
// the pool (q, k and v, or gate and up, meet their threads once). A row's
// outputs depend only on that row.
void Linear(const float* x, int64_t n, absl::Span<const Target> targets, ThreadPool& pool);

// Rows [32 * panel, 32 * panel + 32) of a packed K-quant weight as an f32
// panel [in][32] (zeros past the last row), bit-identical to DecodeGgmlRow.
void WidenPanel(const Tensor& w, int64_t panel, float* out);

// The eight lanes' sum, in the order every variant uses.
inline float SumLanes(const float* a) { return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7])); }

__attribute__((target("avx2,fma,f16c"), always_inline)) inline float SumLanes(__m256 v) {
  alignas(32) float lanes[kLanes];
  _mm256_store_ps(lanes, v);
  return SumLanes(lanes);
}

// An f16 as f32 by F16C (exactly F16ToF32).
__attribute__((target("avx2,fma,f16c"), always_inline)) inline float F16At(const uint8_t* p) {
  uint16_t bits;
  __builtin_memcpy(&bits, p, sizeof bits);
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(bits)));
}

// The two int32 halves of a 64-byte register added: the AVX-512 variants
// work two 32-byte chunks at a time and fold them into AVX2's eight lanes.
// (Masked extracts, not casts: GCC 12 warns on those intrinsics' undefined
// upper halves.)
__attribute__((target("avx512f"), always_inline)) inline __m256i AddHalves(__m512i v) {
  return _mm256_add_epi32(_mm512_maskz_extracti64x4_epi64(0xF, v, 0), _mm512_maskz_extracti64x4_epi64(0xF, v, 1));
}

}  // namespace llama::cpu::kquant

#endif  // LLAMA_OPS_CPU_KQUANT_LINEAR_H_
