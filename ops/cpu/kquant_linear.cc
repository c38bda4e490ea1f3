#include "ops/cpu/kquant_linear.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ops/cpu/cache_aligned.h"
#include "ops/cpu/panels.h"
#include "ops/cpu/simd.h"
#include "ops/dtype.h"
#include "ops/ggml_blocks.h"
#include "ops/quantize.h"

namespace llama::cpu::kquant {
namespace {

// Weight rows per task: at decode few, so that the threads share out even
// small weights; with more rows of x than a kernel takes (prefill), enough
// that x, streamed through once per task, is read a few times per call
// rather than once per 16 rows (for the TinyLlama shape's w2 at 512 tokens,
// 2.9 MB of x 128 times), while the task's weights (up to ~410 KB of q4_k)
// stay in L2 as x passes.
constexpr int64_t kRowsPerTask = 16;
constexpr int64_t kPrefillRowsPerTask = 128;

GgmlType GgmlTypeOf(DType dtype) { return dtype == DType::kQ6_K ? GgmlType::kQ6_K : GgmlType::kQ4_K; }

int64_t BlockBytes(DType dtype) { return dtype == DType::kQ6_K ? kQ6KBlockBytes : kQ4KBlockBytes; }

using simd::Int32x8;
using simd::Int8x8;

// One super-block of x: d = max|v| / 127 (kept in f32), q = round(v / d),
// as QuantizeBlock does per 32, stored where `placement` says; and the sums
// of q, which the weights' offsets (q4_k's minimums, q6_k's 32) multiply.
__attribute__((always_inline)) inline float QuantizeSuperBlockImpl(const float* v, const Placement& placement, int8_t* q,
                                                               int16_t* sums) {
  const float amax = simd::AbsMax(v, kSuperBlock);
  const float d = amax / 127, id = InverseScale(d);
  std::fill(sums, sums + kSuperBlock / placement.sum_width, 0);
  for (int i = 0; i < kSuperBlock; i += 16) {
    const Int32x8 a = simd::RoundScaled8(v + i, id), b = simd::RoundScaled8(v + i + 8, id);
    const Int8x8 qa = simd::Narrow(a), qb = simd::Narrow(b);
    int8_t* out = q + placement.offsets[i / 32] + i % 32;
    std::memcpy(out, &qa, sizeof qa);
    std::memcpy(out + 8, &qb, sizeof qb);
    const Int32x8 pairs = a + b;
    int32_t sum = 0;
    for (int k = 0; k < 8; ++k) sum += pairs[k];
    sums[i / placement.sum_width] = static_cast<int16_t>(sums[i / placement.sum_width] + sum);
  }
  return d;
}

LLAMA_DISPATCH_V3(float, QuantizeSuperBlock, (const float* v, const Placement& placement, int8_t* q, int16_t* sums),
                  (v, placement, q, sums))

}  // namespace

absl::StatusOr<Tensor> PackWeight(const Tensor& w) {
  if (w.rank() != 2 || w.dim(1) % kSuperBlock != 0) {
    return absl::InvalidArgumentError(absl::StrCat("PackLinearWeight: ", w.DebugString(),
                                                   ": expected rows of whole super-blocks of ", kSuperBlock));
  }
  ASSIGN_OR_RETURN(Tensor packed, Tensor::Zeros(w.dtype(), w.shape()));
  std::memcpy(packed.mutable_raw(), w.raw(), w.bytes());
  return packed.Relabeled(w.shape(), TensorLayout::kLinearPanels);
}

void Linear(const float* x, int64_t n, absl::Span<const Target> targets, ThreadPool& pool) {
  const int64_t in = targets[0].weight->dim(1), blocks = in / kSuperBlock;
  // x quantized once per placement, shared by every thread; the buffers are
  // the calling thread's, kept between calls.
  struct QuantizedX {
    const Placement* placement = nullptr;
    CacheAlignedVector<int8_t> q;
    CacheAlignedVector<float> d;
    CacheAlignedVector<int16_t> sums;
  };
  thread_local std::vector<QuantizedX> quantized;
  absl::InlinedVector<size_t, 4> x_of;  // Per target, an index: `quantized` may grow.
  absl::InlinedVector<int64_t, 5> first_task = {0};
  const int64_t rows_per_task = n > kMaxRows ? kPrefillRowsPerTask : kRowsPerTask;
  size_t used = 0;
  for (const Target& t : targets) {
    size_t i = 0;
    while (i < used && quantized[i].placement != t.placement) ++i;
    if (i == used) {
      if (quantized.size() <= used) quantized.emplace_back();
      QuantizedX& qx = quantized[used++];
      const int64_t sums_per_block = kSuperBlock / t.placement->sum_width;
      qx.placement = t.placement;
      qx.q.resize(n * in);
      qx.d.resize(n * blocks);
      qx.sums.resize(n * blocks * sums_per_block);
      for (int64_t b = 0; b < n * blocks; ++b) {
        qx.d[b] = QuantizeSuperBlock(x + b * kSuperBlock, *t.placement, qx.q.data() + b * kSuperBlock,
                                     qx.sums.data() + b * sums_per_block);
      }
    }
    x_of.push_back(i);
    first_task.push_back(first_task.back() + (t.weight->dim(0) + rows_per_task - 1) / rows_per_task);
  }
  // The workers name their own thread_locals: hand them the caller's.
  const std::vector<QuantizedX>& callers = quantized;
  pool.ParallelFor(first_task.back(), 1, [&](int64_t begin, int64_t end) {
    size_t t = 0;
    for (int64_t task = begin; task < end; ++task) {
      while (task >= first_task[t + 1]) ++t;
      const Target& target = targets[t];
      const QuantizedX& qx = callers[x_of[t]];
      const int64_t out = target.weight->dim(0), sums_per_block = kSuperBlock / target.placement->sum_width;
      const int64_t row_bytes = blocks * BlockBytes(target.weight->dtype());
      const uint8_t* weights = static_cast<const uint8_t*>(target.weight->raw());
      const int64_t first = (task - first_task[t]) * rows_per_task, count = std::min(out - first, rows_per_task);
      for (int64_t r = 0; r < n; r += kMaxRows) {
        const int rows = static_cast<int>(std::min<int64_t>(kMaxRows, n - r));
        QuantizedRow xr[kMaxRows];
        for (int i = 0; i < rows; ++i) {
          xr[i] = {qx.q.data() + (r + i) * in, qx.d.data() + (r + i) * blocks,
                   qx.sums.data() + (r + i) * blocks * sums_per_block};
        }
        (*target.kernels)[rows - 1](xr, weights + first * row_bytes, row_bytes, count, blocks,
                                    target.y + r * out + first, out);
      }
    }
  });
}

namespace {

// Lines k .. k + 8 of a panel (kPanelWidth apart at `out`) take columns
// k .. k + 8 of tile rows c .. c + 8 (`stride` apart at `tile`): an 8 x 8
// transpose in registers, where the scalar copy read a float at a time.
LLAMA_V3 __attribute__((always_inline)) inline void Transpose8x8(const float* tile, int64_t stride, float* out) {
  __m256 r[8], t[8], u[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(tile + i * stride);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int j = 0; j < 4; ++j) {
    _mm256_storeu_ps(out + j * kPanelWidth, _mm256_permute2f128_ps(u[j], u[j + 4], 0x20));
    _mm256_storeu_ps(out + (j + 4) * kPanelWidth, _mm256_permute2f128_ps(u[j], u[j + 4], 0x31));
  }
}

// The panel's kSuperBlock lines at `lines` from a full tile of kPanelWidth
// rows `stride` apart: one v3 call a super-block, the 8 x 8 blocks inlined.
LLAMA_V3 void TransposeTile(const float* tile, int64_t stride, float* lines) {
  for (int64_t k = 0; k < kSuperBlock; k += 8) {
    for (int64_t c = 0; c < kPanelWidth; c += 8) Transpose8x8(tile + c * stride + k, stride, lines + k * kPanelWidth + c);
  }
}

}  // namespace

void WidenPanel(const Tensor& w, int64_t panel, float* out) {
  const int64_t block_bytes = BlockBytes(w.dtype());
  const int64_t rows = w.dim(0), in = w.dim(1), row_bytes = in / kSuperBlock * block_bytes;
  const int64_t first = panel * kPanelWidth, count = std::min<int64_t>(kPanelWidth, rows - first);
  const uint8_t* weights = static_cast<const uint8_t*>(w.raw()) + first * row_bytes;
  const uint32_t type = static_cast<uint32_t>(GgmlTypeOf(w.dtype()));
  const bool transpose_in_registers = count == kPanelWidth && simd::UseV3();
  // A super-block of each row decoded side by side (in L1), then written
  // down the panel line by line. Decoding whole rows first read them back
  // 32 streams a power of two apart, which thrashed the cache sets; the
  // tile's rows are padded for the same reason.
  constexpr int64_t kTileStride = kSuperBlock + 16;
  float tile[kPanelWidth * kTileStride];
  for (int64_t b = 0; b < in / kSuperBlock; ++b) {
    for (int64_t c = 0; c < count; ++c) {
      // A whole super-block of a known type: cannot fail.
      DecodeGgmlRow(type, weights + c * row_bytes + b * block_bytes, kSuperBlock, tile + c * kTileStride).IgnoreError();
    }
    float* lines = out + b * kSuperBlock * kPanelWidth;
    if (transpose_in_registers) {
      TransposeTile(tile, kTileStride, lines);
      continue;
    }
    for (int64_t k = 0; k < kSuperBlock; ++k) {
      float* line = lines + k * kPanelWidth;
      for (int64_t c = 0; c < count; ++c) line[c] = tile[c * kTileStride + k];
      for (int64_t c = count; c < kPanelWidth; ++c) line[c] = 0.0f;
    }
  }
}

}  // namespace llama::cpu::kquant
