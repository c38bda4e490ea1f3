// y = x W^T for activations x [n, in] (f32) and a weight W [out, in] in
// f32, f16, bf16, q8_0 or q4_k, accumulating in f32: every linear layer of
// the model.
//
// f32, f16 and bf16 weights are packed once (PackLinearWeight) into panels
// of 32 output rows, each [in][32], kept in their own dtype. Every kernel
// then sums each output over k from first to last, one product at a time,
// with the same operations: the decode kernel (up to 3 rows of x) widens
// panel lines in registers as they stream by; more rows go through the
// prefill kernel, which widens a panel to f32 once (in L2) and multiplies
// it into register tiles of y with the widest vectors the CPU has. So a
// row's outputs do not depend on n or on the other rows, bit for bit:
// batch-invariant (what lets the engine promise that a request's tokens do
// not depend on the load). q8_0 weights are packed in groups of eight
// rows (linear_q8.h): integer dot products at decode, widened into f32
// panels at prefill; their outputs can differ in the last bits with the
// batch size. q4_k and q6_k weights (kquant_linear.h) likewise: integer kernels at
// decode (x quantized per 256), DecodeGgmlRow's values in f32 panels at
// prefill; a row's outputs are the same for any n up to 12, and for any n
// with int8_activations, but change when the batch crosses into prefill.
//
// Threads split the output panels.

#ifndef LLAMA_OPS_CPU_LINEAR_H_
#define LLAMA_OPS_CPU_LINEAR_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ops/cpu/thread_pool.h"
#include "ops/tensor.h"

namespace llama::cpu {

// w ([out, in], row-major f32, bf16, f16, q8_0 or q4_k) packed as Linear reads
// it (TensorLayout::kLinearPanels, same dtype, owned storage); weights
// already packed are returned as they are.
absl::StatusOr<Tensor> PackLinearWeight(const Tensor& w, ThreadPool& pool);

struct LinearOptions {
  // q8_0, q4_k and q6_k weights: every row of x through the integer
  // kernels, prefill too (activations quantized to int8, as decode does and
  // as llama.cpp does), so a row's outputs no longer depend on the rows
  // computed with it, at some accuracy (worker/batch/int8_accuracy_test.cc
  // measures both ways). The job's default (--int8_prefill).
  bool int8_activations = false;
  // bf16 weights: x rounded to bf16 before it is multiplied (llama.cpp's
  // way with BF16 weights), every row whatever n, so rows stay independent
  // of their batch. With AVX-512 BF16 the products go two a lane per
  // instruction (vdpbf16ps): prefill and batched decode, bound by the
  // multiply-adds, run faster; the cost in accuracy is measured in
  // worker/batch/int8_accuracy_test.cc. q8_0, q4_k and q6_k weights, on
  // CPUs with AMX-BF16: prefill (more rows than the integer decode takes)
  // through bf16 tiles, the decoded weights rounded to bf16 too
  // (linear_amx.h), before int8_activations (asked for explicitly, the
  // tiles are the faster prefill there); elsewhere they ignore it, as f32
  // weights do.
  bool bf16_activations = false;
};

// y [n, out] = x [n, in] * w^T; w is [out, in], packed.
absl::Status Linear(const float* x, int64_t n, const Tensor& w, float* y, ThreadPool& pool,
                    const LinearOptions& options = {});

// The prefill kernel in use: "avx512", "avx2" or "baseline", the widest
// this CPU runs; the decode kernel follows it (fused multiply-adds for the
// first two, as they have).
std::string_view PrefillKernel();

// Tests: use the named prefill kernel from now on, if this CPU runs it.
bool ForcePrefillKernelForTesting(std::string_view name);

// The kernel bf16_activations uses: "avx512bf16" (bf16 dot products), or
// "f32" (x rounded to bf16 through the f32 kernels).
std::string_view Bf16ActivationsKernel();
// Tests: use the named kernel from now on, if this CPU runs it.
bool ForceBf16ActivationsKernelForTesting(std::string_view name);

// Whether this CPU has AMX-BF16 (and AVX-512 BF16 for rounding the
// panels) and the kernel lets this process use the tiles (asked once):
// then bf16_activations takes q8_0, q4_k and q6_k prefill through them.
bool AmxBf16Usable();
// Tests: take the tiles (if this CPU and OS allow them) or not; false,
// changing nothing, when asked for tiles that cannot be used.
bool ForceAmxBf16ForTesting(bool use);

// The int8 (q8_0) decode kernel in use: "avx512vnni", "avx2" or "scalar".
std::string_view Int8Kernel();
// Tests: use the named int8 kernel from now on, if this CPU runs it.
bool ForceInt8KernelForTesting(std::string_view name);

// How far ahead of the weights it is reading an integer decode kernel
// (q8_0, q4_k, q6_k) asks for more, in bytes; 0: it asks for none. 2 KB on
// Intel CPUs, where the hardware prefetchers kept one stream a core at half
// the core's read bandwidth (Q4_K_M decode of the TinyLlama shape 49-50 ->
// 25.5-26.1 ms/step on a 2-vCPU Xeon with AMX, 2 threads; 84 -> 45 on one;
// int8 unchanged there); none elsewhere, as on an AMD EPYC a prefetch 1 KB
// ahead made Q4_K_M decode ~5% slower and one 2 KB ahead int8 decode ~34%
// (medians). Prefetching changes no result.
int64_t WeightPrefetchBytes();
// Benchmarks and tests: `bytes` ahead from now on (0: none).
void SetWeightPrefetchBytes(int64_t bytes);

// Linear of one x for each output (q, k and v; gate and up): K-quant
// weights at decode share one quantization of x and one pass of the pool;
// each y is what Linear gives it, bit for bit.
struct LinearOutput {
  const Tensor* weight;
  float* y;
};
absl::Status Linears(const float* x, int64_t n, absl::Span<const LinearOutput> outputs, ThreadPool& pool,
                     const LinearOptions& options = {});

// The q4_k decode kernel in use (linear_q4k.h): "avx512vnni", "avx2" or
// "scalar"; every one gives the same bits.
std::string_view Q4KKernel();

// Tests: use the named q4_k kernel from now on, if this CPU runs it.
bool ForceQ4KKernelForTesting(std::string_view name);

// The q6_k decode kernel in use (linear_q6k.h), named as Q4KKernel's.
std::string_view Q6KKernel();

// Tests: use the named q6_k kernel from now on, if this CPU runs it.
bool ForceQ6KKernelForTesting(std::string_view name);

}  // namespace llama::cpu

#endif  // LLAMA_OPS_CPU_LINEAR_H_
