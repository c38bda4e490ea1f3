#include "ops/cpu/kquant_linear.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ops/cpu/panels.h"
#include "ops/dtype.h"
#include "ops/ggml_blocks.h"

namespace llama::cpu::kquant {
namespace {

// Weight rows per task.
constexpr int64_t kRowsPerTask = 16;

GgmlType GgmlTypeOf(DType dtype) { return dtype == DType::kQ6_K ? GgmlType::kQ6_K : GgmlType::kQ4_K; }

int64_t BlockBytes(DType dtype) { return dtype == DType::kQ6_K ? kQ6KBlockBytes : kQ4KBlockBytes; }

// One super-block of x: d = max|v| / 127 (kept in f32), q = round(v / d),
// as QuantizeBlock does per 32, stored where `placement` says; and the sums
// of q, which the weights' offsets (q4_k's minimums, q6_k's 32) multiply.
float QuantizeSuperBlock(const float* v, const Placement& placement, int8_t* q, int16_t* sums) {
  float amax = 0;
  for (int i = 0; i < kSuperBlock; ++i) amax = std::max(amax, std::fabs(v[i]));
  const float d = amax / 127, id = d != 0 ? 1 / d : 0;
  std::fill(sums, sums + kSuperBlock / placement.sum_width, 0);
  for (int i = 0; i < kSuperBlock; ++i) {
    const int8_t value = static_cast<int8_t>(std::lround(v[i] * id));
    q[placement.offsets[i / 32] + i % 32] = value;
    sums[i / placement.sum_width] += value;
  }
  return d;
}

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

void Linear(const float* x, int64_t n, const Tensor& w, const Placement& placement, const RowDots& kernels, float* y,
            ThreadPool& pool) {
  const int64_t out = w.dim(0), in = w.dim(1), blocks = in / kSuperBlock;
  const int64_t row_bytes = blocks * BlockBytes(w.dtype()), sums_per_block = kSuperBlock / placement.sum_width;
  // x quantized once per call, shared by every thread.
  thread_local std::vector<int8_t> xq;
  thread_local std::vector<float> xd;
  thread_local std::vector<int16_t> xs;
  xq.resize(n * in);
  xd.resize(n * blocks);
  xs.resize(n * blocks * sums_per_block);
  for (int64_t b = 0; b < n * blocks; ++b) {
    xd[b] = QuantizeSuperBlock(x + b * kSuperBlock, placement, xq.data() + b * kSuperBlock,
                               xs.data() + b * sums_per_block);
  }
  // The workers see their own thread_locals: hand them the caller's rows.
  const int8_t* q = xq.data();
  const float* d = xd.data();
  const int16_t* s = xs.data();
  const uint8_t* weights = static_cast<const uint8_t*>(w.raw());
  pool.ParallelFor((out + kRowsPerTask - 1) / kRowsPerTask, 1, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin * kRowsPerTask; o < std::min(out, end * kRowsPerTask); ++o) {
      const uint8_t* row = weights + o * row_bytes;
      for (int64_t r = 0; r < n; r += kMaxRows) {
        const int rows = static_cast<int>(std::min<int64_t>(kMaxRows, n - r));
        QuantizedRow xr[kMaxRows];
        for (int i = 0; i < rows; ++i) {
          xr[i] = {q + (r + i) * in, d + (r + i) * blocks, s + (r + i) * blocks * sums_per_block};
        }
        kernels[rows - 1](xr, row, blocks, y + r * out + o, out);
      }
    }
  });
}

void WidenPanel(const Tensor& w, int64_t panel, float* out) {
  const int64_t block_bytes = BlockBytes(w.dtype());
  const int64_t rows = w.dim(0), in = w.dim(1), row_bytes = in / kSuperBlock * block_bytes;
  const int64_t first = panel * kPanelWidth, count = std::min<int64_t>(kPanelWidth, rows - first);
  const uint8_t* weights = static_cast<const uint8_t*>(w.raw()) + first * row_bytes;
  const uint32_t type = static_cast<uint32_t>(GgmlTypeOf(w.dtype()));
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
    for (int64_t k = 0; k < kSuperBlock; ++k) {
      float* line = out + (b * kSuperBlock + k) * kPanelWidth;
      for (int64_t c = 0; c < count; ++c) line[c] = tile[c * kTileStride + k];
      for (int64_t c = count; c < kPanelWidth; ++c) line[c] = 0.0f;
    }
  }
}

}  // namespace llama::cpu::kquant
