// Linear layers over q4_k weights (llama.cpp's Q4_K, dtype.h), read in
// their stored row order: a row's 144-byte super-blocks stream by in
// order, and each row of x meets every weight row it needs while the
// nibbles are in registers.
//
// Decode: each row of x is quantized to int8 per super-block of 256 with
// an f32 scale (llama.cpp's Q8_K choice for Q4_K, rather than q8_0's
// blocks of 32: one scale per super-block lets the eight sub-block scales
// multiply in int16/int32, so each super-block gives exact int32 sums, and
// the sums of x's int8 per 32 carry the minimums). Every variant (AVX-512
// VNNI on 64-byte registers: vpmaddubsw then vpdpwssd; AVX2: vpmaddubsw,
// vpmaddwd, vpaddd; portable scalar code) leaves the same eight int32 lanes
// per super-block and folds them into eight f32 accumulators with the same
// fused multiply-adds, in registers until the row ends, so all give the
// same bits (linear_q4k.cc says which lanes).
// Prefill decodes 32 rows at a time into the f32 panels of the f32 kernel
// (WidenQ4KPanel, bit-identical to DecodeGgmlRow). Internal to ops/cpu.

#ifndef LLAMA_OPS_CPU_LINEAR_Q4K_H_
#define LLAMA_OPS_CPU_LINEAR_Q4K_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "ops/cpu/linear.h"
#include "ops/cpu/thread_pool.h"
#include "ops/tensor.h"

namespace llama::cpu {

// A row-major q4_k weight [out, in] (in % 256 == 0) copied into owned
// storage, rows as they are, labelled TensorLayout::kLinearPanels.
absl::StatusOr<Tensor> PackQ4KWeight(const Tensor& w);

// y [n, out] = x [n, in] * w^T for a packed q4_k weight [out, in], through
// the integer kernels whatever n (the kernel in use: Q4KKernel, linear.h).
// A row's outputs depend only on that row.
void LinearQ4K(const float* x, int64_t n, const Tensor& w, float* y, ThreadPool& pool);

// Rows [32 * panel, 32 * panel + 32) of a packed q4_k weight as an f32
// panel [in][32] (zeros past the last row), bit-identical to DecodeGgmlRow
// of the rows: for the prefill kernels.
void WidenQ4KPanel(const Tensor& w, int64_t panel, float* out);

}  // namespace llama::cpu

#endif  // LLAMA_OPS_CPU_LINEAR_Q4K_H_
