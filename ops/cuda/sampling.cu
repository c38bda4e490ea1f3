// Token choice on the device: argmax or top-p from one uniform number.

#include "ops/cuda/sampling.h"

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "ops/cuda/device_util.cuh"

namespace llama::cuda {
namespace {

constexpr int kSampleThreads = 512;

struct ValueIndex {
  float value;
  int index;
};

// The larger value; the smaller index on ties (the first maximum, as the CPU).
struct FirstMax {
  __device__ ValueIndex operator()(const ValueIndex& a, const ValueIndex& b) const {
    return b.value > a.value || (b.value == a.value && b.index < a.index) ? b : a;
  }
};

// One block per row; see SampleRows in kernels.h for the method.
__global__ void __launch_bounds__(kSampleThreads)
    SampleKernel(const float* logits, int64_t vocab, const RowSampling* params, float* probs, int32_t* tokens,
                 float* logprobs) {
  using PairReduce = cub::BlockReduce<ValueIndex, kSampleThreads>;
  using DoubleReduce = cub::BlockReduce<double, kSampleThreads>;
  using IntMax = cub::BlockReduce<int, kSampleThreads>;
  using IntScan = cub::BlockScan<int, kSampleThreads>;
  using DoubleScan = cub::BlockScan<double, kSampleThreads>;
  __shared__ union {
    typename PairReduce::TempStorage pair;
    typename DoubleReduce::TempStorage sum;
    typename IntMax::TempStorage max;
    typename IntScan::TempStorage int_scan;
    typename DoubleScan::TempStorage double_scan;
  } temp;
  __shared__ ValueIndex shared_best;
  __shared__ double shared_sum;
  __shared__ int shared_int;
  // cub leaves a reduction's result in thread 0: share it, and sync before
  // the union is reused.
  const auto block_sum = [&](double v) {
    const double total = DoubleReduce(temp.sum).Sum(v);
    if (threadIdx.x == 0) shared_sum = total;
    __syncthreads();
    const double result = shared_sum;
    __syncthreads();
    return result;
  };
  const int64_t row = blockIdx.x;
  const float* l = logits + row * vocab;
  float* p = probs + row * vocab;
  const RowSampling params_row = params[row];

  ValueIndex best{-FLT_MAX, 0};
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    if (l[i] > best.value) best = {l[i], static_cast<int>(i)};
  }
  best = PairReduce(temp.pair).Reduce(best, FirstMax());
  if (threadIdx.x == 0) shared_best = best;
  __syncthreads();
  best = shared_best;
  __syncthreads();
  const float max_logit = best.value;
  double local = 0.0;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) local += __expf(l[i] - max_logit);
  const double log_normaliser = log(block_sum(local));

  int token = best.index;
  if (params_row.temperature > 0) {
    local = 0.0;
    for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
      p[i] = expf((l[i] - max_logit) / params_row.temperature);
      local += p[i];
    }
    __syncthreads();
    const double limit = params_row.top_p * block_sum(local);
    // Token k (by descending probability) is kept while the mass before it
    // is <= limit: the kept set is every p above the smallest threshold t
    // whose mass above is <= limit, plus ties at t in id order. Positive
    // floats order as their bit patterns: bisect those, in [0, 1].
    uint32_t lo = 0, hi = __float_as_uint(1.0f);
    while (lo < hi) {
      const uint32_t mid = lo + (hi - lo) / 2;
      const float t = __uint_as_float(mid);
      local = 0.0;
      for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) local += p[i] > t ? p[i] : 0.0f;
      if (block_sum(local) <= limit) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    const float t = __uint_as_float(lo);
    // Contiguous segments per thread, so prefix sums run in token-id order.
    const int64_t segment = (vocab + blockDim.x - 1) / blockDim.x;
    const int64_t begin = min(vocab, threadIdx.x * segment), end = min(vocab, begin + segment);
    double above = 0.0;
    int ties = 0;
    for (int64_t i = begin; i < end; ++i) {
      if (p[i] > t) above += p[i];
      ties += p[i] == t;
    }
    const double mass_above = block_sum(above);
    int tie_rank = 0, all_ties = 0;
    IntScan(temp.int_scan).ExclusiveSum(ties, tie_rank, all_ties);
    __syncthreads();
    // The m-th tie (in id order) is kept while mass_above + m * t <= limit.
    const double room = t > 0 ? floor((limit - mass_above) / t) + 1 : static_cast<double>(all_ties);
    const int kept_ties = static_cast<int>(fmin(fmax(room, 0.0), static_cast<double>(all_ties)));
    double mass = 0.0;
    int last_kept = -1;
    for (int64_t i = begin; i < end; ++i) {
      bool kept = p[i] > t;
      if (p[i] == t) kept = tie_rank++ < kept_ties;
      if (kept) mass += p[i];
      if (kept && p[i] > 0) last_kept = static_cast<int>(i);
    }
    double before = 0.0, kept_mass = 0.0;
    DoubleScan(temp.double_scan).ExclusiveSum(mass, before, kept_mass);
    if (threadIdx.x == 0) shared_int = INT32_MAX;
    __syncthreads();
    const double target = params_row.uniform * kept_mass;
    if (mass > 0 && target >= before && target < before + mass) {
      // The target falls in this segment: walk it again. Should rounding
      // carry the walk past its end, the segment's last kept token is it.
      tie_rank -= ties;
      double cumulative = before;
      int pick = last_kept;
      for (int64_t i = begin; i < end; ++i) {
        bool kept = p[i] > t;
        if (p[i] == t) kept = tie_rank++ < kept_ties;
        if (!kept) continue;
        cumulative += p[i];
        if (target < cumulative) {
          pick = static_cast<int>(i);
          break;
        }
      }
      atomicMin(&shared_int, pick);
    }
    __syncthreads();
    token = shared_int;
    __syncthreads();
    if (token == INT32_MAX) {
      // Rounding put the target past every segment: the last kept token
      // with mass, as the CPU does.
      last_kept = IntMax(temp.max).Reduce(last_kept, [](int a, int b) { return a > b ? a : b; });
      if (threadIdx.x == 0) shared_int = last_kept;
      __syncthreads();
      token = shared_int;
    }
  }
  // A NaN or infinite logit leaves no kept token (the sums are NaN): pick the
  // largest comparable logit rather than an index outside the row. The
  // caller flags non-finite logits and fails the step, as the CPU model does.
  if (token < 0 || token >= vocab) token = best.index;
  if (threadIdx.x == 0) {
    tokens[row] = token;
    logprobs[row] = static_cast<float>(l[token] - max_logit - log_normaliser);
  }
}


}  // namespace

absl::Status SampleRows(const float* logits, int64_t rows, int64_t vocab, const RowSampling* params, float* probs,
                        int32_t* tokens, float* logprobs, cudaStream_t stream) {
  if (rows == 0) return absl::OkStatus();
  if (vocab > INT32_MAX) return absl::InvalidArgumentError(absl::StrFormat("SampleRows: vocabulary of %d", vocab));
  SampleKernel<<<rows, kSampleThreads, 0, stream>>>(logits, vocab, params, probs, tokens, logprobs);
  return Launched("SampleKernel");
}

}  // namespace llama::cuda
