// Proves the CUDA build rules end to end: a kernel compiled by nvcc, cuBLAS
// and NCCL, each checked against a CPU answer. The device query runs
// everywhere; the rest needs a GPU and says so when there is none.

#include <cmath>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ops/cuda/axpy.h"
#include "ops/cuda/cuda_libraries.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/gpu_test.h"

namespace llama::cuda {
namespace {

using ::testing::HasSubstr;

// Device copy of a host vector, freed on scope exit.
class DeviceFloats {
 public:
  explicit DeviceFloats(const std::vector<float>& host) : size_(host.size()) {
    EXPECT_TRUE(CudaCall(cudaMalloc(&data_, size_ * sizeof(float)), "cudaMalloc").ok());
    EXPECT_TRUE(CudaCall(cudaMemcpy(data_, host.data(), size_ * sizeof(float),
                                    cudaMemcpyHostToDevice),
                         "cudaMemcpy")
                    .ok());
  }
  ~DeviceFloats() { cudaFree(data_); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;

  float* get() { return data_; }
  std::vector<float> ToHost() const {
    std::vector<float> host(size_);
    EXPECT_TRUE(CudaCall(cudaMemcpy(host.data(), data_, size_ * sizeof(float),
                                    cudaMemcpyDeviceToHost),
                         "cudaMemcpy")
                    .ok());
    return host;
  }

 private:
  size_t size_;
  float* data_ = nullptr;
};

TEST(ToolkitTest, DeviceQueryNeverFailsWithoutAGpu) {
  std::string why_none;
  absl::StatusOr<int> count = VisibleDeviceCount(&why_none);
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_GE(*count, 0);
  if (*count == 0) {
    EXPECT_FALSE(why_none.empty());
  }
}

TEST(ToolkitTest, ErrorsNameTheCall) {
  absl::Status status = CudaCall(cudaErrorInvalidValue, "cudaMemcpy");
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(status.message(), HasSubstr("cudaMemcpy failed"));
  EXPECT_THAT(status.message(), HasSubstr("cudaErrorInvalidValue"));
  EXPECT_THAT(CublasCall(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSgemm").message(),
              HasSubstr("cublasSgemm failed"));
  EXPECT_THAT(NcclCall(ncclInvalidArgument, "ncclAllReduce").message(),
              HasSubstr("ncclAllReduce failed"));
  EXPECT_TRUE(CudaCall(cudaSuccess, "cudaFree").ok());
}

TEST(ToolkitTest, AxpyKernelMatchesCpu) {
  LLAMA_SKIP_WITHOUT_GPU();
  const int n = 100003;  // Not a multiple of the block size.
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) {
    x[i] = 0.5f * i;
    y[i] = 1.0f - i;
  }
  DeviceFloats dx(x), dy(y);
  ASSERT_TRUE(CudaCall(LaunchAxpy(2.0f, dx.get(), dy.get(), n, nullptr), "LaunchAxpy").ok());
  ASSERT_TRUE(CudaCall(cudaDeviceSynchronize(), "cudaDeviceSynchronize").ok());
  const std::vector<float> out = dy.ToHost();
  // 2 * 0.5i + (1 - i) = 1 exactly in fp32 for these magnitudes.
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], 1.0f) << i;
}

// Opened at run time (cuda_libraries.h), needing no GPU: the toolkit's
// libraries are found and have every function we call.
TEST(ToolkitTest, CublasAndNcclOpenWithEveryFunction) {
  const absl::StatusOr<const CublasLibrary*> cublas = Cublas();
  ASSERT_TRUE(cublas.ok()) << cublas.status();
  EXPECT_NE((*cublas)->cublasGemmEx, nullptr);
  EXPECT_STREQ((*cublas)->cublasGetStatusName(CUBLAS_STATUS_NOT_INITIALIZED), "CUBLAS_STATUS_NOT_INITIALIZED");
  const absl::StatusOr<const NcclLibrary*> nccl = Nccl();
  ASSERT_TRUE(nccl.ok()) << nccl.status();
  EXPECT_NE((*nccl)->ncclBroadcast, nullptr);
  EXPECT_STREQ((*nccl)->ncclGetErrorString(ncclSuccess), "no error");
}

TEST(ToolkitTest, CublasSgemmMatchesCpu) {
  LLAMA_SKIP_WITHOUT_GPU();
  // Column-major, as cuBLAS expects: C (2x2) = A (2x3) * B (3x2).
  const std::vector<float> a = {1, 4, 2, 5, 3, 6};
  const std::vector<float> b = {7, 9, 11, 8, 10, 12};
  DeviceFloats da(a), db(b), dc(std::vector<float>(4, 0.0f));
  absl::StatusOr<const CublasLibrary*> cublas = Cublas();
  ASSERT_TRUE(cublas.ok()) << cublas.status();
  cublasHandle_t handle = nullptr;
  ASSERT_TRUE(CublasCall((*cublas)->cublasCreate(&handle), "cublasCreate").ok());
  const float one = 1.0f, zero = 0.0f;
  ASSERT_TRUE(CublasCall((*cublas)->cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, da.get(), 2,
                                     db.get(), 3, &zero, dc.get(), 2),
                         "cublasSgemm")
                  .ok());
  ASSERT_TRUE(CudaCall(cudaDeviceSynchronize(), "cudaDeviceSynchronize").ok());
  (*cublas)->cublasDestroy(handle);
  // [[1 2 3] [4 5 6]] * [[7 8] [9 10] [11 12]] = [[58 64] [139 154]].
  EXPECT_THAT(dc.ToHost(), ::testing::ElementsAre(58, 139, 64, 154));
}

TEST(ToolkitTest, NcclAllReduceOnOneRank) {
  LLAMA_SKIP_WITHOUT_GPU();
  absl::StatusOr<const NcclLibrary*> nccl = Nccl();
  ASSERT_TRUE(nccl.ok()) << nccl.status();
  ncclComm_t comm = nullptr;
  const int devices[] = {0};
  ASSERT_TRUE(NcclCall((*nccl)->ncclCommInitAll(&comm, 1, devices), "ncclCommInitAll").ok());
  DeviceFloats data(std::vector<float>{1.5f, -2.0f, 3.0f});
  ASSERT_TRUE(NcclCall((*nccl)->ncclAllReduce(data.get(), data.get(), 3, ncclFloat, ncclSum, comm, nullptr),
                       "ncclAllReduce")
                  .ok());
  ASSERT_TRUE(CudaCall(cudaDeviceSynchronize(), "cudaDeviceSynchronize").ok());
  (*nccl)->ncclCommDestroy(comm);
  // A sum over one rank is the identity.
  EXPECT_THAT(data.ToHost(), ::testing::ElementsAre(1.5f, -2.0f, 3.0f));
}

}  // namespace
}  // namespace llama::cuda
