#include "ops/cpu/linear_amx.h"

#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "ops/cpu/cache_aligned.h"
#include "ops/cpu/kernel_dispatch.h"
#include "ops/cpu/linear.h"
#include "ops/cpu/panels.h"

namespace llama::cpu {
namespace {

#define LLAMA_AMX __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma")))

// Linux's arch_prctl request and feature number for the tiles' state
// (asm/prctl.h, not in every libc's headers).
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

// The layout of LDTILECFG's 64 bytes (palette 1).
struct TileConfig {
  uint8_t palette;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};

// Tiles 0 and 1: y for the panel's two halves of 16 outputs; 2: x, 16 rows
// of 32 bf16; 3 and 4: the halves' weights, 16 pairs of k by 16 outputs.
// Every tile 16 rows of 64 bytes. Loaded at each call and released at its
// end: the ABI keeps no tile state across calls, and another AMX user on
// the thread (a linked library) could change it.
LLAMA_AMX void ConfigureTiles() {
  TileConfig config;
  std::memset(&config, 0, sizeof config);
  config.palette = 1;
  for (int t = 0; t < 5; ++t) {
    config.rows[t] = kAmxTileRows;
    config.colsb[t] = 64;
  }
  _tile_loadconfig(&config);
}

// The panel's lines in bf16 pairs: pairs[k / 2][c] = (w[c][k], w[c][k + 1]),
// the B operand of TDPBF16PS for 16 outputs at a time, rounded to nearest
// even (VCVTNE2PS2BF16).
LLAMA_AMX void PairPanel(const float* panel, int64_t in, uint32_t* pairs) {
  // Word 2i of a pair vector from line k's value i, word 2i + 1 from line
  // k + 1's (VCVTNE2PS2BF16 puts the first 16 in the low words).
  alignas(64) int16_t interleave[32];
  for (int i = 0; i < 16; ++i) {
    interleave[2 * i] = static_cast<int16_t>(i);
    interleave[2 * i + 1] = static_cast<int16_t>(i + 16);
  }
  const __m512i order = _mm512_load_si512(interleave);
  for (int64_t k = 0; k < in; k += 2) {
    for (int c = 0; c < kPanelWidth; c += 16) {
      const __m512 low = _mm512_loadu_ps(panel + k * kPanelWidth + c);
      const __m512 high = _mm512_loadu_ps(panel + (k + 1) * kPanelWidth + c);
      const __m512i both = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(high, low));
      _mm512_storeu_si512(pairs + k / 2 * kPanelWidth + c, _mm512_permutexvar_epi16(order, both));
    }
  }
}

bool CpuAndOsAllowAmxBf16() {
  static const bool allowed = [] {
    __builtin_cpu_init();
    if (!AmxAllowed() || !__builtin_cpu_supports("amx-tile") || !__builtin_cpu_supports("amx-bf16") ||
        !__builtin_cpu_supports("avx512bf16") || !__builtin_cpu_supports("avx512bw") ||
        !__builtin_cpu_supports("avx512vl")) {
      return false;
    }
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return allowed;
}

std::atomic<bool>& AmxBf16Off() {
  static std::atomic<bool> off{false};
  return off;
}

}  // namespace

bool AmxBf16Usable() { return CpuAndOsAllowAmxBf16() && !AmxBf16Off().load(std::memory_order_relaxed); }

bool ForceAmxBf16ForTesting(bool use) {
  if (use && !CpuAndOsAllowAmxBf16()) return false;
  AmxBf16Off().store(!use, std::memory_order_relaxed);
  return true;
}

LLAMA_AMX void AmxPanelTimesX(const uint32_t* x_pairs, int64_t n, int64_t in, const float* panel, int count,
                              float* y, int64_t out, int64_t first) {
  thread_local CacheAlignedVector<uint32_t> pairs;
  if (static_cast<int64_t>(pairs.size()) < in / 2 * kPanelWidth) pairs.resize(in / 2 * kPanelWidth);
  PairPanel(panel, in, pairs.data());
  const uint32_t* w = pairs.data();
  alignas(64) float tile[2][kAmxTileRows][16];
  ConfigureTiles();
  for (int64_t m = 0; m < n; m += kAmxTileRows) {
    _tile_zero(0);
    _tile_zero(1);
    for (int64_t k = 0; k < in; k += 32) {
      _tile_loadd(2, x_pairs + m * (in / 2) + k / 2, in * 2);
      _tile_loadd(3, w + k / 2 * kPanelWidth, kPanelWidth * 4);
      _tile_loadd(4, w + k / 2 * kPanelWidth + 16, kPanelWidth * 4);
      _tile_dpbf16ps(0, 2, 3);
      _tile_dpbf16ps(1, 2, 4);
    }
    _tile_stored(0, tile[0], 64);
    _tile_stored(1, tile[1], 64);
    const int64_t rows = std::min<int64_t>(kAmxTileRows, n - m);
    for (int64_t r = 0; r < rows; ++r) {
      for (int c = 0; c < count; ++c) y[(m + r) * out + first + c] = tile[c / 16][r][c % 16];
    }
  }
  _tile_release();
}

}  // namespace llama::cpu
