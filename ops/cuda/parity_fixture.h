// For the CUDA parity tests: a test fixture that skips without a GPU and
// moves vectors to and from the device (freed after each test), and the
// tolerance check they share.

#ifndef LLAMA_OPS_CUDA_PARITY_FIXTURE_H_
#define LLAMA_OPS_CUDA_PARITY_FIXTURE_H_

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "ops/cuda/cuda_status.h"
#include "ops/random_values.h"

namespace llama::cuda {

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
  static std::vector<float> Random(size_t n, uint32_t seed) { return testing::Random(n, seed); }
  static void ExpectClose(const std::vector<float>& gpu, const std::vector<float>& cpu, double atol, double rtol,
                          const std::string& what) {
    ASSERT_EQ(gpu.size(), cpu.size()) << what;
    for (size_t i = 0; i < gpu.size(); ++i) {
      ASSERT_FALSE(std::isnan(gpu[i])) << what << " index " << i;
      ASSERT_LE(std::abs(gpu[i] - cpu[i]), atol + rtol * std::abs(cpu[i])) << what << " index " << i;
    }
  }

 private:
  std::vector<void*> allocations_;
};

}  // namespace llama::cuda

#endif  // LLAMA_OPS_CUDA_PARITY_FIXTURE_H_
