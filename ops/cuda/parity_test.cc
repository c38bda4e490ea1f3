// Every CUDA op against its CPU twin (ops/cpu/) on random inputs of several
// shapes. Tolerances |gpu - cpu| <= atol + rtol |cpu|: f32 paths 1e-5/1e-5
// (different summation order only); GEMMs with 16-bit weights 1e-2/1e-2
// (the GPU rounds activations to the weights' type for the tensor cores,
// the CPU keeps them f32). NaN is never accepted. Skipped without a GPU.

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ops/cast.h"
#include "ops/cpu/attention.h"
#include "ops/cpu/elementwise.h"
#include "ops/cpu/linear.h"
#include "ops/cpu/rope.h"
#include "ops/cpu/sampling.h"
#include "ops/cpu/thread_pool.h"
#include "ops/cuda/cublas_linear.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/kernels.h"

namespace llama::cuda {
namespace {

class ParityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why_none;
    absl::StatusOr<int> devices = VisibleDeviceCount(&why_none);
    ASSERT_TRUE(devices.ok()) << devices.status();
    if (*devices == 0) GTEST_SKIP() << "no CUDA device visible: " << why_none;
  }
  void TearDown() override {
    for (void* p : allocations_) cudaFree(p);
  }
  template <typename T>
  T* Upload(const std::vector<T>& host) {
    void* device = nullptr;
    EXPECT_TRUE(CudaCall(cudaMalloc(&device, std::max<size_t>(1, host.size() * sizeof(T))), "cudaMalloc").ok());
    EXPECT_TRUE(CudaCall(cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy").ok());
    allocations_.push_back(device);
    return static_cast<T*>(device);
  }
  template <typename T>
  std::vector<T> Download(const T* device, size_t count) {
    EXPECT_TRUE(CudaCall(cudaDeviceSynchronize(), "cudaDeviceSynchronize").ok());
    std::vector<T> host(count);
    EXPECT_TRUE(CudaCall(cudaMemcpy(host.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy").ok());
    return host;
  }
  static std::vector<float> Random(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng);
    return v;
  }
  static void ExpectClose(const std::vector<float>& gpu, const std::vector<float>& cpu, double atol, double rtol,
                          const std::string& what) {
    ASSERT_EQ(gpu.size(), cpu.size()) << what;
    for (size_t i = 0; i < gpu.size(); ++i) {
      ASSERT_FALSE(std::isnan(gpu[i])) << what << " index " << i;
      ASSERT_LE(std::abs(gpu[i] - cpu[i]), atol + rtol * std::abs(cpu[i])) << what << " index " << i;
    }
  }
  std::vector<void*> allocations_;
};

TEST_F(ParityTest, LinearEveryDtypeAndShape) {
  ThreadPool pool(4);
  for (const auto& [n, in, out] : {std::tuple<int64_t, int64_t, int64_t>{1, 64, 96}, {7, 4096, 4096}, {33, 512, 11008}}) {
    const std::vector<float> x = Random(n * in, 1), w = Random(out * in, 2);
    absl::StatusOr<std::unique_ptr<CublasLinear>> linear = CublasLinear::Create(nullptr, n * in);
    ASSERT_TRUE(linear.ok()) << linear.status();
    for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
      std::vector<uint16_t> half(w.size());
      for (size_t i = 0; i < w.size(); ++i) half[i] = dtype == DType::kF16 ? F32ToF16(w[i]) : F32ToBf16(w[i]);
      const Tensor cpu_w = dtype == DType::kF32 ? Tensor::View(dtype, {out, in}, w.data())
                                                : Tensor::View(dtype, {out, in}, half.data());
      std::vector<float> expected(n * out);
      cpu::Linear(x.data(), n, cpu_w, expected.data(), pool);
      const void* device_w = dtype == DType::kF32 ? static_cast<const void*>(Upload(w)) : Upload(half);
      float* y = Upload(std::vector<float>(n * out));
      ASSERT_TRUE((*linear)->Run(Upload(x), n, device_w, dtype, out, in, y).ok());
      const double tol = dtype == DType::kF32 ? 1e-4 : 1e-2;  // f32: K up to 4096 terms.
      ExpectClose(Download(y, n * out), expected, tol, tol, std::string("linear ") + std::string(DTypeName(dtype)));
    }
  }
}

TEST_F(ParityTest, RmsNormRopeSwiGluEmbedding) {
  const int64_t n = 5, dim = 4096, heads = 32, hd = 128;
  const std::vector<float> x = Random(n * dim, 3), w = Random(dim, 4);
  std::vector<uint16_t> w16(dim);
  for (int64_t i = 0; i < dim; ++i) w16[i] = F32ToBf16(w[i]);
  std::vector<float> expected(n * dim);
  cpu::RmsNorm(x.data(), Tensor::View(DType::kBF16, {dim}, w16.data()), n, dim, 1e-5f, expected.data());
  float* out = Upload(std::vector<float>(n * dim));
  ASSERT_TRUE(RmsNorm(Upload(x), Upload(w16), DType::kBF16, n, dim, 1e-5f, out, nullptr).ok());
  ExpectClose(Download(out, n * dim), expected, 1e-5, 1e-5, "rms_norm");

  cpu::RopeTable table(hd, 4096, 10000.0);
  std::vector<float> q = Random(n * heads * hd, 5), q_cpu = q;
  const std::vector<int32_t> positions = {0, 1, 17, 1000, 4095};
  for (int64_t r = 0; r < n; ++r) table.Apply(q_cpu.data() + r * heads * hd, heads, positions[r]);
  float* q_gpu = Upload(q);
  ASSERT_TRUE(Rope(q_gpu, n, heads, hd, Upload(positions), Upload(table.cos_table()), Upload(table.sin_table()), nullptr).ok());
  ExpectClose(Download(q_gpu, q.size()), q_cpu, 1e-5, 1e-5, "rope");

  std::vector<float> gate = Random(10000, 6), up = Random(10000, 7), gate_cpu = gate;
  cpu::SwiGlu(gate_cpu.data(), up.data(), 10000);
  float* gate_gpu = Upload(gate);
  ASSERT_TRUE(SwiGlu(gate_gpu, Upload(up), 10000, nullptr).ok());
  ExpectClose(Download(gate_gpu, 10000), gate_cpu, 1e-5, 1e-5, "swiglu");

  const std::vector<float> table_values = Random(100 * 64, 8);
  const std::vector<int32_t> tokens = {5, 99, 0, 5};
  std::vector<float> rows(4 * 64);
  cpu::EmbeddingLookup(Tensor::View(DType::kF32, {100, 64}, table_values.data()), {5, 99, 0, 5}, rows.data());
  float* gpu_rows = Upload(std::vector<float>(4 * 64));
  ASSERT_TRUE(EmbeddingLookup(Upload(tokens), 4, Upload(table_values), DType::kF32, 64, gpu_rows, nullptr).ok());
  ExpectClose(Download(gpu_rows, rows.size()), rows, 0, 0, "embedding");
}

TEST_F(ParityTest, AttentionPrefillAndDecode) {
  ThreadPool pool(4);
  for (const auto& [start, len] : {std::pair<int64_t, int64_t>{0, 37}, {300, 1}, {64, 64}}) {
    const int64_t n_heads = 8, n_kv = 2, hd = 128, capacity = 512;
    const std::vector<float> q = Random(len * n_heads * hd, 9), k = Random(capacity * n_kv * hd, 10),
                             v = Random(capacity * n_kv * hd, 11);
    const std::vector<int32_t> kv_head_of = {0, 0, 0, 0, 1, 1, 1, 1};
    const std::vector<int> kv_cpu(kv_head_of.begin(), kv_head_of.end());
    std::vector<float> expected(len * n_heads * hd);
    cpu::Attention(
        {q.data(), k.data(), v.data(), DType::kF32, kv_cpu.data(), start, len, n_heads, n_kv, hd, expected.data()},
        pool);
    float* out = Upload(std::vector<float>(expected.size()));
    ASSERT_TRUE(Attention(Upload(q), Upload(k), Upload(v), Upload(kv_head_of), start, len, n_heads, n_kv, hd, out, nullptr).ok());
    ExpectClose(Download(out, expected.size()), expected, 1e-5, 1e-4, "attention");
  }
}

TEST_F(ParityTest, ArgmaxAndLogProbs) {
  const int64_t rows = 3, vocab = 32000;
  std::vector<float> logits = Random(rows * vocab, 12);
  logits[vocab + 7] = logits[vocab + 9] = 50.0f;  // A tie: the first wins.
  const std::vector<int32_t> tokens = {3, 7, 31999};
  int32_t* argmax = Upload(std::vector<int32_t>(rows));
  float* logprobs = Upload(std::vector<float>(rows));
  float* device_logits = Upload(logits);
  ASSERT_TRUE(ArgmaxRows(device_logits, rows, vocab, argmax, nullptr).ok());
  ASSERT_TRUE(LogProbRows(device_logits, rows, vocab, Upload(tokens), logprobs, nullptr).ok());
  const std::vector<int32_t> gpu_argmax = Download(argmax, rows);
  const std::vector<float> gpu_logprobs = Download(logprobs, rows);
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_EQ(gpu_argmax[r], cpu::Argmax(logits.data() + r * vocab, vocab)) << r;
    EXPECT_NEAR(gpu_logprobs[r], cpu::LogProb(logits.data() + r * vocab, vocab, tokens[r]), 1e-4) << r;
  }
}

}  // namespace
}  // namespace llama::cuda
