// The packed layout of 16- and 32-bit linear weights (PackLinearWeight):
// panels of kPanelWidth output rows, each [in][kPanelWidth]. Internal to
// ops/cpu.

#ifndef LLAMA_OPS_CPU_PANELS_H_
#define LLAMA_OPS_CPU_PANELS_H_

#include <algorithm>
#include <cstdint>

namespace llama::cpu {

inline constexpr int kPanelWidth = 32;

// The output rows panel p holds of a weight with `out` rows.
inline int PanelColumns(int64_t out, int64_t p) {
  return static_cast<int>(std::min<int64_t>(kPanelWidth, out - p * kPanelWidth));
}

}  // namespace llama::cpu

#endif  // LLAMA_OPS_CPU_PANELS_H_
