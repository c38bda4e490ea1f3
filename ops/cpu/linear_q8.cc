#include "ops/cpu/linear_q8.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#include "ops/cast.h"
#include "ops/cpu/simd.h"
#include "ops/dtype.h"
#include "ops/quantize.h"

namespace llama::cpu {
namespace {

// A row of x quantized for the integer kernels: int8 values, one f32 scale
// per block of 32.
struct QuantizedRow {
  const int8_t* q;
  const float* d;
};

void QuantizeRow(const float* x, int64_t in, int8_t* q, float* d) {
  for (int64_t b = 0; b < in / kQ8BlockElements; ++b) {
    d[b] = QuantizeBlock(x + b * kQ8BlockElements, q + b * kQ8BlockElements);
  }
}

float BlockScale(const uint8_t* block) {
  uint16_t bits;
  std::memcpy(&bits, block, 2);
  return F16ToF32(bits);
}

// dots[r] = x[r] . w for `rows` rows of x and one q8_0 weight row.
using DotFn = void (*)(const QuantizedRow* x, int rows, const uint8_t* w, int64_t blocks, float* dots);

void DotScalar(const QuantizedRow* x, int rows, const uint8_t* w, int64_t blocks, float* dots) {
  for (int r = 0; r < rows; ++r) {
    float sum = 0;
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* block = w + b * kQ8BlockBytes;
      int32_t isum = 0;
      for (int i = 0; i < kQ8BlockElements; ++i) {
        isum += static_cast<int8_t>(block[2 + i]) * x[r].q[b * kQ8BlockElements + i];
      }
      sum += BlockScale(block) * x[r].d[b] * static_cast<float>(isum);
    }
    dots[r] = sum;
  }
}

// One body, compiled for each instruction set by a macro (a template would
// need the target attributes of its callers to inline the intrinsics, and a
// shared target would let the AVX2 copy pick up AVX-512 encodings); within
// it a template on the row count, so that the accumulators' indices are
// constants and the accumulators stay in registers (indexed by a variable,
// they lived on the stack: a store-to-load chain per block, 42 -> ~35 ms a
// decode step of the bench model).
// PRODUCTS(aw, sx) turns a block into 8 int32 partial sums of its 32
// products. vpmaddubsw and vpdpbusd take unsigned times signed, so w's sign
// moves onto x (|w| * sign(w) x); |w| is at most 127 (the quantizer never
// writes -128), so vpmaddubsw's pairs fit in int16.
// How far ahead of its block the kernel asks for weights (the rows a task
// takes are contiguous): the hardware prefetcher alone left it waiting on
// memory (bench model, batch 1, old/new alternating: see PERFORMANCE.md).
constexpr int64_t kQ8PrefetchBytes = 2048;

// Block `B` of w into chain `C` of every row's accumulators.
#define LLAMA_Q8_BLOCK(PRODUCTS, B, C)                                                                    \
  {                                                                                                       \
    const uint8_t* block = w + (B) * kQ8BlockBytes;                                                       \
    __builtin_prefetch(block + kQ8PrefetchBytes);                                                         \
    const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));                   \
    const __m256i aw = _mm256_sign_epi8(wq, wq);                                                          \
    const float wd = _cvtsh_ss(static_cast<uint16_t>(block[0] | block[1] << 8));                          \
    _Pragma("GCC unroll 4") for (int r = 0; r < kRows; ++r) {                                             \
      const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[r].q + (B) * kQ8BlockElements)); \
      const __m256 products = _mm256_cvtepi32_ps(PRODUCTS(aw, _mm256_sign_epi8(xq, wq)));                 \
      acc[r][C] = _mm256_fmadd_ps(products, _mm256_set1_ps(wd * x[r].d[(B)]), acc[r][C]);                 \
    }                                                                                                     \
  }

#define LLAMA_Q8_DOT(NAME, TARGET, PRODUCTS)                                                              \
  template <int kRows>                                                                                    \
  __attribute__((target(TARGET))) inline void NAME##Rows(const QuantizedRow* x, const uint8_t* w,         \
                                                         int64_t blocks, float* dots) {                   \
    /* Independent chains per row, so that the FMA's latency, not its throughput, */                      \
    /* does not bound a row: four for one row, two each for more. */                                      \
    constexpr int kChains = kRows == 1 ? 4 : 2;                                                           \
    __m256 acc[kRows][kChains];                                                                           \
    for (int r = 0; r < kRows; ++r) {                                                                     \
      for (int c = 0; c < kChains; ++c) acc[r][c] = _mm256_setzero_ps();                                  \
    }                                                                                                     \
    int64_t b = 0;                                                                                        \
    for (; b + kChains <= blocks; b += kChains) {                                                         \
      _Pragma("GCC unroll 4") for (int c = 0; c < kChains; ++c) LLAMA_Q8_BLOCK(PRODUCTS, b + c, c)                                \
    }                                                                                                     \
    for (; b < blocks; ++b) LLAMA_Q8_BLOCK(PRODUCTS, b, 0)                                                \
    for (int r = 0; r < kRows; ++r) {                                                                     \
      __m256 sum = acc[r][0];                                                                             \
      for (int c = 1; c < kChains; ++c) sum = _mm256_add_ps(sum, acc[r][c]);                              \
      __m128 s = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));                  \
      s = _mm_add_ps(s, _mm_movehl_ps(s, s));                                                             \
      s = _mm_add_ss(s, _mm_movehdup_ps(s));                                                              \
      dots[r] = _mm_cvtss_f32(s);                                                                         \
    }                                                                                                     \
  }                                                                                                       \
  __attribute__((target(TARGET))) void NAME(const QuantizedRow* x, int rows, const uint8_t* w, int64_t blocks, \
                                            float* dots) {                                                \
    switch (rows) {                                                                                       \
      case 1: return NAME##Rows<1>(x, w, blocks, dots);                                                   \
      case 2: return NAME##Rows<2>(x, w, blocks, dots);                                                   \
      case 3: return NAME##Rows<3>(x, w, blocks, dots);                                                   \
      default: return NAME##Rows<4>(x, w, blocks, dots);                                                  \
    }                                                                                                     \
  }

#define LLAMA_Q8_MADDUBS(aw, sx) _mm256_madd_epi16(_mm256_maddubs_epi16(aw, sx), _mm256_set1_epi16(1))
#define LLAMA_Q8_DPBUSD(aw, sx) _mm256_dpbusd_epi32(_mm256_setzero_si256(), aw, sx)

LLAMA_Q8_DOT(DotAvx2, "avx2,fma,f16c", LLAMA_Q8_MADDUBS)
LLAMA_Q8_DOT(DotVnni, "avx2,fma,f16c,avx512vnni,avx512vl", LLAMA_Q8_DPBUSD)

struct Q8KernelChoice {
  std::string_view name;
  DotFn dot;
};

const Q8KernelChoice kQ8Kernels[] = {{"avx512vnni", DotVnni}, {"avx2", DotAvx2}, {"scalar", DotScalar}};

bool CpuRuns(std::string_view name) {
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  if (name == "avx512vnni") {
    return avx2 && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl");
  }
  if (name == "avx2") return avx2;
  return name == "scalar";
}

std::atomic<const Q8KernelChoice*>& ChosenKernel() {
  static std::atomic<const Q8KernelChoice*> chosen = [] {
    for (const Q8KernelChoice& k : kQ8Kernels) {
      if (CpuRuns(k.name)) return &k;
    }
    return &kQ8Kernels[2];
  }();
  return chosen;
}

// Weight rows per task.
constexpr int64_t kRowBlock = 32;

// DequantizeQ8_0 eight weights an instruction, bit-identical (the same
// product of the f16 scale and the exact int8): the generic loop was 17%
// of an int8 prefill's time on the bench model.
__attribute__((target("avx2,f16c"))) void DequantizeQ8_0V3(const uint8_t* blocks, int64_t n, float* out) {
  for (int64_t b = 0; b < n / kQ8BlockElements; ++b) {
    const uint8_t* block = blocks + b * kQ8BlockBytes;
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(static_cast<uint16_t>(block[0] | block[1] << 8)));
    for (int i = 0; i < kQ8BlockElements; i += 8) {
      const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + 2 + i)));
      _mm256_storeu_ps(out + b * kQ8BlockElements + i, _mm256_mul_ps(d, _mm256_cvtepi32_ps(q)));
    }
  }
}

}  // namespace

std::string_view Q8Kernel() { return ChosenKernel().load()->name; }

void DequantizeQ8Rows(const uint8_t* blocks, int64_t n, float* out) {
  if (simd::UseV3()) return DequantizeQ8_0V3(blocks, n, out);
  DequantizeQ8_0(blocks, n, out);
}

bool ForceQ8KernelForTesting(std::string_view name) {
  for (const Q8KernelChoice& k : kQ8Kernels) {
    if (k.name == name && CpuRuns(name)) {
      ChosenKernel().store(&k);
      return true;
    }
  }
  return false;
}

void LinearQ8(const float* x, int64_t n, const Tensor& w, float* y, ThreadPool& pool) {
  const int64_t out = w.dim(0), in = w.dim(1), blocks = in / kQ8BlockElements;
  const int64_t row_bytes = blocks * kQ8BlockBytes;
  // x quantized once per call, shared by every thread.
  thread_local std::vector<int8_t> xq;
  thread_local std::vector<float> xd;
  xq.resize(n * in);
  xd.resize(n * blocks);
  thread_local std::vector<QuantizedRow> quantized;
  quantized.resize(n);
  for (int64_t r = 0; r < n; ++r) {
    QuantizeRow(x + r * in, in, xq.data() + r * in, xd.data() + r * blocks);
    quantized[r] = {xq.data() + r * in, xd.data() + r * blocks};
  }
  const DotFn dot = ChosenKernel().load()->dot;
  const uint8_t* weights = static_cast<const uint8_t*>(w.raw());
  // The workers see their own thread_locals: hand them the caller's rows.
  const QuantizedRow* rows = quantized.data();
  pool.ParallelFor((out + kRowBlock - 1) / kRowBlock, 1, [&](int64_t begin, int64_t end) {
    float dots[4];
    for (int64_t o = begin * kRowBlock; o < std::min(out, end * kRowBlock); ++o) {
      for (int64_t r = 0; r < n; r += 4) {
        const int count = static_cast<int>(std::min<int64_t>(4, n - r));
        dot(rows + r, count, weights + o * row_bytes, blocks, dots);
        for (int k = 0; k < count; ++k) y[(r + k) * out + o] = dots[k];
      }
    }
  });
}

}  // namespace llama::cpu
