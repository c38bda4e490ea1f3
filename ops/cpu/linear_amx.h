// Prefill of block-type weights (q8_0, q4_k, q6_k) on Intel AMX with x
// rounded to bf16 (LinearOptions::bf16_activations): each panel of 32
// output rows, widened to f32 as the f32 prefill widens it, is rounded to
// bf16 pairs and multiplied by x's bf16 pairs in 16 x 16 tiles (TDPBF16PS,
// 16 x 16 x 32 multiply-adds an instruction, f32 sums). The f32 panels run
// at the FMA units' rate, a tenth of the tiles'; llama.cpp's AMX backend
// (int8 tiles) was 1.2-1.3x our f32 prefill on such a CPU. The cost in
// accuracy: x and the decoded weights each rounded to bf16 (8 bits of
// mantissa; a 4-bit weight's own rounding is 16 times coarser). Internal
// to ops/cpu.

#ifndef LLAMA_OPS_CPU_LINEAR_AMX_H_
#define LLAMA_OPS_CPU_LINEAR_AMX_H_

#include <cstdint>

namespace llama::cpu {

// Rows of x in a tile; the x pairs AmxPanelTimesX reads are a multiple of
// this many rows (zeros past n).
inline constexpr int64_t kAmxTileRows = 16;

// y[r * out + first + c] for r < n, c < count (<= kPanelWidth) from the f32
// panel [in][kPanelWidth] (in % 32 == 0) and x's bf16 pairs (RoundToBf16Pairs
// layout, rows padded to a multiple of kAmxTileRows). Needs AmxBf16Usable()
// (linear.h).
void AmxPanelTimesX(const uint32_t* x_pairs, int64_t n, int64_t in, const float* panel, int count, float* y,
                    int64_t out, int64_t first);

}  // namespace llama::cpu

#endif  // LLAMA_OPS_CPU_LINEAR_AMX_H_
