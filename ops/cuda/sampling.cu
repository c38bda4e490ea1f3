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

using PairReduce = cub::BlockReduce<ValueIndex, kSampleThreads>;
using DoubleReduce = cub::BlockReduce<double, kSampleThreads>;
using IntMax = cub::BlockReduce<int, kSampleThreads>;
using IntScan = cub::BlockScan<int, kSampleThreads>;
using DoubleScan = cub::BlockScan<double, kSampleThreads>;

// cub's temporary storage, for one reduction or scan at a time.
union SampleTempStorage {
  typename PairReduce::TempStorage pair;
  typename DoubleReduce::TempStorage sum;
  typename IntMax::TempStorage max;
  typename IntScan::TempStorage int_scan;
  typename DoubleScan::TempStorage double_scan;
};

// The kernel's shared memory: that storage, and the slots through which
// thread 0 shares a result with the block.
struct SampleShared {
  SampleTempStorage& temp;
  ValueIndex& best;
  double& sum;
  int& int_value;
};

// The helpers below are called by every thread of the block, in the same
// order (they synchronise it). cub leaves a reduction's result in thread 0:
// share it, and sync before the union is reused.
__device__ __forceinline__ double BlockSum(double v, SampleShared shared) {
  const double total = DoubleReduce(shared.temp.sum).Sum(v);
  if (threadIdx.x == 0) shared.sum = total;
  __syncthreads();
  const double result = shared.sum;
  __syncthreads();
  return result;
}

// The row's largest logit and its first index.
__device__ __forceinline__ ValueIndex BlockArgmax(const float* l, int64_t vocab, SampleShared shared) {
  ValueIndex best{-FLT_MAX, 0};
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    if (l[i] > best.value) best = {l[i], static_cast<int>(i)};
  }
  best = PairReduce(shared.temp.pair).Reduce(best, FirstMax());
  if (threadIdx.x == 0) shared.best = best;
  __syncthreads();
  best = shared.best;
  __syncthreads();
  return best;
}

// Token k (by descending probability) is kept while the mass before it is
// <= limit: the kept set is every p above the smallest threshold t whose
// mass above is <= limit, plus ties at t in id order. Positive floats order
// as their bit patterns: bisect those, in [0, 1]. Returns t.
__device__ __forceinline__ float TopPThreshold(const float* p, int64_t vocab, double limit, SampleShared shared) {
  uint32_t lo = 0, hi = __float_as_uint(1.0f);
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    const float t = __uint_as_float(mid);
    double local = 0.0;
    for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) local += p[i] > t ? p[i] : 0.0f;
    if (BlockSum(local, shared) <= limit) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return __uint_as_float(lo);
}

// This thread's segment [begin, end) of the row (contiguous, so that prefix
// sums run in token-id order) at threshold t: its ties (values equal to t),
// the row's ties before its first (tie_rank), how many of the row's ties
// are kept, the mass it keeps and its last kept token with mass (-1: none).
struct KeptSegment {
  int64_t begin, end;
  int ties, tie_rank, kept_ties;
  double mass;
  int last_kept;
};

__device__ __forceinline__ KeptSegment KeepSegment(const float* p, int64_t vocab, float t, double limit,
                                                   SampleShared shared) {
  KeptSegment k;
  const int64_t segment = (vocab + blockDim.x - 1) / blockDim.x;
  k.begin = min(vocab, threadIdx.x * segment);
  k.end = min(vocab, k.begin + segment);
  double above = 0.0;
  k.ties = 0;
  for (int64_t i = k.begin; i < k.end; ++i) {
    if (p[i] > t) above += p[i];
    k.ties += p[i] == t;
  }
  const double mass_above = BlockSum(above, shared);
  k.tie_rank = 0;
  int all_ties = 0;
  IntScan(shared.temp.int_scan).ExclusiveSum(k.ties, k.tie_rank, all_ties);
  __syncthreads();
  // The m-th tie (in id order) is kept while mass_above + m * t <= limit.
  const double room = t > 0 ? floor((limit - mass_above) / t) + 1 : static_cast<double>(all_ties);
  k.kept_ties = static_cast<int>(fmin(fmax(room, 0.0), static_cast<double>(all_ties)));
  k.mass = 0.0;
  k.last_kept = -1;
  for (int64_t i = k.begin; i < k.end; ++i) {
    bool kept = p[i] > t;
    if (p[i] == t) kept = k.tie_rank++ < k.kept_ties;
    if (kept) k.mass += p[i];
    if (kept && p[i] > 0) k.last_kept = static_cast<int>(i);
  }
  return k;
}

// The kept token at `uniform` of the row's kept mass.
__device__ __forceinline__ int PickKept(const float* p, float t, double uniform, KeptSegment k, SampleShared shared) {
  double before = 0.0, kept_mass = 0.0;
  DoubleScan(shared.temp.double_scan).ExclusiveSum(k.mass, before, kept_mass);
  if (threadIdx.x == 0) shared.int_value = INT32_MAX;
  __syncthreads();
  const double target = uniform * kept_mass;
  if (k.mass > 0 && target >= before && target < before + k.mass) {
    // The target falls in this segment: walk it again. Should rounding
    // carry the walk past its end, the segment's last kept token is it.
    k.tie_rank -= k.ties;
    double cumulative = before;
    int pick = k.last_kept;
    for (int64_t i = k.begin; i < k.end; ++i) {
      bool kept = p[i] > t;
      if (p[i] == t) kept = k.tie_rank++ < k.kept_ties;
      if (!kept) continue;
      cumulative += p[i];
      if (target < cumulative) {
        pick = static_cast<int>(i);
        break;
      }
    }
    atomicMin(&shared.int_value, pick);
  }
  __syncthreads();
  int token = shared.int_value;
  __syncthreads();
  if (token == INT32_MAX) {
    // Rounding put the target past every segment: the last kept token
    // with mass, as the CPU does.
    const int last_kept = IntMax(shared.temp.max).Reduce(k.last_kept, [](int a, int b) { return a > b ? a : b; });
    if (threadIdx.x == 0) shared.int_value = last_kept;
    __syncthreads();
    token = shared.int_value;
  }
  return token;
}

// Top-p sampling of the row at params.temperature > 0; p gets the
// unnormalised probabilities.
__device__ __forceinline__ int SampleTopP(const float* l, float* p, int64_t vocab, float max_logit,
                                          const RowSampling& params, SampleShared shared) {
  double local = 0.0;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    p[i] = expf((l[i] - max_logit) / params.temperature);
    local += p[i];
  }
  __syncthreads();
  const double limit = params.top_p * BlockSum(local, shared);
  const float t = TopPThreshold(p, vocab, limit, shared);
  const KeptSegment kept = KeepSegment(p, vocab, t, limit, shared);
  return PickKept(p, t, params.uniform, kept, shared);
}

// One block per row; see SampleRows in kernels.h for the method.
__global__ void __launch_bounds__(kSampleThreads)
    SampleKernel(const float* logits, int64_t vocab, const RowSampling* params, float* probs, int32_t* tokens,
                 float* logprobs) {
  __shared__ SampleTempStorage temp;
  __shared__ ValueIndex shared_best;
  __shared__ double shared_sum;
  __shared__ int shared_int;
  const SampleShared shared{temp, shared_best, shared_sum, shared_int};
  const int64_t row = blockIdx.x;
  const float* l = logits + row * vocab;
  float* p = probs + row * vocab;
  const RowSampling params_row = params[row];

  const ValueIndex best = BlockArgmax(l, vocab, shared);
  const float max_logit = best.value;
  double local = 0.0;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) local += __expf(l[i] - max_logit);
  const double log_normaliser = log(BlockSum(local, shared));

  int token = best.index;
  if (params_row.temperature > 0) token = SampleTopP(l, p, vocab, max_logit, params_row, shared);
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
