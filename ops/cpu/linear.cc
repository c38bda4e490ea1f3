#include "ops/cpu/linear.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ops/cast.h"
#include "ops/cpu/cache_aligned.h"
#include "ops/cpu/linear_bf16.h"
#include "ops/cpu/kquant_linear.h"
#include "ops/cpu/linear_amx.h"
#include "ops/cpu/linear_q4k.h"
#include "ops/cpu/linear_q6k.h"
#include "ops/cpu/linear_panels.h"
#include "ops/cpu/linear_q8.h"
#include "ops/cpu/panels.h"
#include "ops/quantize.h"

namespace llama::cpu {
namespace {

// Up to this many rows of x, q8_0 and K-quant weights take the integer
// decode kernels (linear_q8.h, kquant_linear.h); above, f32 panels (K-quants kept the
// q8_0 crossover, not measured on its own). Measured crossover on the bench model
// (for the 16-bit kernels these replaced): streaming won at batch 12,
// panels at 16.
constexpr int64_t kQ8DecodeRows = 12;

// Transposes rows [p * 32, p * 32 + 32) of a row-major [out, in] weight
// into packed panel p ([in][32]), zero beyond out: a bit copy.
template <typename Bits>
void PackPanelBits(const Bits* w, int64_t out, int64_t in, int64_t p, Bits* packed) {
  Bits* dst = packed + p * in * kPanelWidth;
  const int64_t rows = std::min<int64_t>(kPanelWidth, out - p * kPanelWidth);
  for (int64_t c = 0; c < rows; ++c) {
    const Bits* src = w + (p * kPanelWidth + c) * in;
    for (int64_t k = 0; k < in; ++k) dst[k * kPanelWidth + c] = src[k];
  }
}

bool IsKQuant(const Tensor& w) { return w.dtype() == DType::kQ4_K || w.dtype() == DType::kQ6_K; }

kquant::Target KQuantTarget(const Tensor& w, float* y) {
  return w.dtype() == DType::kQ4_K ? Q4KTarget(w, y) : Q6KTarget(w, y);
}

// Whether n rows of x meet q8_0, q4_k and q6_k weights in their integer
// kernels: at decode always; at prefill with int8_activations, unless
// bf16_activations takes the AMX tiles.
bool IntegerKernelsTake(int64_t n, const LinearOptions& options) {
  if (n <= kQ8DecodeRows) return true;
  if (options.bf16_activations && AmxBf16Usable()) return false;
  return options.int8_activations;
}

// q8_0, q4_k and q6_k weights: their integer kernels (IntegerKernelsTake),
// else their rows widened into f32 panels for the prefill kernel.
void LinearBlocks(const float* x, int64_t n, const Tensor& w, float* y, ThreadPool& pool,
                  const LinearOptions& options) {
  const bool q8 = w.dtype() == DType::kQ8_0;
  if (IntegerKernelsTake(n, options)) {
    if (q8) {
      LinearQ8(x, n, w, y, pool);
    } else {
      const kquant::Target target = KQuantTarget(w, y);
      kquant::Linear(x, n, {&target, 1}, pool);
    }
    return;
  }
  const int64_t out = w.dim(0), in = w.dim(1);
  const PanelTimesXFn run = PanelPrefillKernel();
  const int64_t panels = (out + kPanelWidth - 1) / kPanelWidth;
  // bf16_activations on AMX: the widened panels go through the tiles
  // (linear_amx.h), x rounded once here (the caller's buffer, as below).
  const bool amx = options.bf16_activations && AmxBf16Usable();
  const uint32_t* x_pairs = nullptr;
  if (amx) {
    thread_local CacheAlignedVector<uint32_t> pairs;
    const int64_t rows = (n + kAmxTileRows - 1) / kAmxTileRows * kAmxTileRows;
    pairs.resize(std::max<size_t>(pairs.size(), rows * in / 2));
    RoundToBf16Pairs(x, n, in, pairs.data());
    std::fill(pairs.begin() + n * in / 2, pairs.begin() + rows * in / 2, 0u);
    x_pairs = pairs.data();
  }
  pool.ParallelFor(panels, 1, [&](int64_t begin, int64_t end) {
    thread_local CacheAlignedVector<float> panel;
    if (static_cast<int64_t>(panel.size()) < in * kPanelWidth) panel.resize(in * kPanelWidth);
    for (int64_t p = begin; p < end; ++p) {
      const int64_t first = p * kPanelWidth, count = std::min<int64_t>(kPanelWidth, out - first);
      if (q8) {
        WidenQ8Panel(w, p, panel.data());
      } else {
        kquant::WidenPanel(w, p, panel.data());
      }
      if (amx) {
        AmxPanelTimesX(x_pairs, n, in, panel.data(), static_cast<int>(count), y, out, first);
      } else {
        run(x, n, in, panel.data(), static_cast<int>(count), y, out, first);
      }
    }
  });
}

}  // namespace

std::string_view PrefillKernel() { return PanelKernelName(); }

namespace {

std::atomic<int64_t>& PrefetchBytes() {
  static std::atomic<int64_t> bytes{[] {
    __builtin_cpu_init();
    return __builtin_cpu_is("intel") ? int64_t{2048} : int64_t{0};
  }()};
  return bytes;
}

}  // namespace

int64_t WeightPrefetchBytes() { return PrefetchBytes().load(std::memory_order_relaxed); }

void SetWeightPrefetchBytes(int64_t bytes) { PrefetchBytes().store(bytes, std::memory_order_relaxed); }

std::string_view Int8Kernel() { return Q8Kernel(); }

bool ForceInt8KernelForTesting(std::string_view name) { return ForceQ8KernelForTesting(name); }

bool ForcePrefillKernelForTesting(std::string_view name) { return ForcePanelKernelForTesting(name); }

absl::StatusOr<Tensor> PackLinearWeight(const Tensor& w, ThreadPool& pool) {
  if (w.layout() == TensorLayout::kLinearPanels) return w;
  if (w.dtype() == DType::kQ8_0 && w.rank() == 2) return PackQ8Weight(w, pool);
  if ((w.dtype() == DType::kQ4_K || w.dtype() == DType::kQ6_K) && w.rank() == 2) return kquant::PackWeight(w);
  if (w.rank() != 2 || !IsFloat16Or32(w.dtype())) {
    return absl::InvalidArgumentError(
        absl::StrCat("PackLinearWeight: ", w.DebugString(), " is not a linear layer's weight (expected a 2-D f32, "
                     "bf16, f16, q8_0, q4_k or q6_k tensor)"));
  }
  const int64_t out = w.dim(0), in = w.dim(1), panels = (out + kPanelWidth - 1) / kPanelWidth;
  ASSIGN_OR_RETURN(Tensor packed, Tensor::Zeros(w.dtype(), {panels * kPanelWidth, in}));
  pool.ParallelFor(panels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      if (w.dtype() == DType::kF32) {
        PackPanelBits(static_cast<const uint32_t*>(w.raw()), out, in, p, static_cast<uint32_t*>(packed.mutable_raw()));
      } else {
        PackPanelBits(static_cast<const uint16_t*>(w.raw()), out, in, p, static_cast<uint16_t*>(packed.mutable_raw()));
      }
    }
  });
  return packed.Relabeled({out, in}, TensorLayout::kLinearPanels);
}

absl::Status Linears(const float* x, int64_t n, absl::Span<const LinearOutput> outputs, ThreadPool& pool,
                     const LinearOptions& options) {
  bool together = IntegerKernelsTake(n, options);
  for (const LinearOutput& o : outputs) {
    together = together && o.weight->layout() == TensorLayout::kLinearPanels && IsKQuant(*o.weight) &&
               o.weight->dim(1) == outputs[0].weight->dim(1);
  }
  if (!together) {
    for (const LinearOutput& o : outputs) RETURN_IF_ERROR(Linear(x, n, *o.weight, o.y, pool, options));
    return absl::OkStatus();
  }
  absl::InlinedVector<kquant::Target, 4> targets;
  for (const LinearOutput& o : outputs) targets.push_back(KQuantTarget(*o.weight, o.y));
  kquant::Linear(x, n, targets, pool);
  return absl::OkStatus();
}

absl::Status Linear(const float* x, int64_t n, const Tensor& w, float* y, ThreadPool& pool,
                    const LinearOptions& options) {
  const int64_t out = w.dim(0), in = w.dim(1);
  if (w.layout() != TensorLayout::kLinearPanels) {
    return absl::InvalidArgumentError(
        absl::StrCat("Linear: the ", w.DebugString(), " weight is row-major; pack it once with PackLinearWeight"));
  }
  if (IsBlockDType(w.dtype())) {
    LinearBlocks(x, n, w, y, pool, options);
    return absl::OkStatus();
  }
  if (options.bf16_activations && w.dtype() == DType::kBF16 && in % 2 == 0) {
    // The buffers are per calling thread, sized once: no allocation per call
    // once warm.
    if (Bf16DotKernel() == "avx512bf16") {
      thread_local CacheAlignedVector<uint32_t> pairs;
      if (static_cast<int64_t>(pairs.size()) < n * in / 2) pairs.resize(n * in / 2);
      RoundToBf16Pairs(x, n, in, pairs.data());
      const int64_t panels = (out + kPanelWidth - 1) / kPanelWidth, step = PanelsPerTask(n, kBf16DotPairedRows);
      // The caller's pairs: a thread_local named inside the task would be
      // each worker's own.
      const uint32_t* rounded_x = pairs.data();
      pool.ParallelFor((panels + step - 1) / step, 1, [&](int64_t begin, int64_t end) {
        Bf16DotPanels(rounded_x, n, in, w, begin * step, std::min(panels, end * step), y);
      });
      return absl::OkStatus();
    }
    thread_local CacheAlignedVector<float> rounded;
    if (static_cast<int64_t>(rounded.size()) < n * in) rounded.resize(n * in);
    for (int64_t i = 0; i < n * in; ++i) rounded[i] = Bf16ToF32(F32ToBf16(x[i]));
    x = rounded.data();
  }
  LinearPacked(x, n, w, y, pool);
  return absl::OkStatus();
}

std::string_view Bf16ActivationsKernel() { return Bf16DotKernel(); }

bool ForceBf16ActivationsKernelForTesting(std::string_view name) { return ForceBf16DotKernelForTesting(name); }

}  // namespace llama::cpu
