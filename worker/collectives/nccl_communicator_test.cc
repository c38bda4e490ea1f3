// The NCCL communicator on one rank (NCCL refuses two ranks on one GPU);
// multi-GPU runs belong to the GPU check script. Needs a GPU.

#include "worker/collectives/nccl_communicator.h"
#include "worker/collectives/one_rank_nccl.h"

#include <cuda_runtime.h>

#include <vector>

#include <gtest/gtest.h>

#include "ops/cuda/cuda_status.h"
#include "ops/cuda/gpu_test.h"
#include "worker/collectives/rendezvous.h"

namespace llama {
namespace {

TEST(NcclCommunicatorTest, OneRankCollectives) {
  LLAMA_SKIP_WITHOUT_GPU();

  absl::StatusOr<OneRankNccl> job = JoinOneRankNccl();
  ASSERT_TRUE(job.ok()) << job.status();
  NcclCommunicator* comm = job->communicator.get();

  std::vector<float> host = {1.5f, -2.0f, 3.0f};
  float* device = nullptr;
  ASSERT_TRUE(cuda::CudaCall(cudaMalloc(&device, 3 * sizeof(float)), "cudaMalloc").ok());
  ASSERT_TRUE(cuda::CudaCall(cudaMemcpy(device, host.data(), 12, cudaMemcpyHostToDevice), "cudaMemcpy").ok());
  ASSERT_TRUE(comm->AllReduceSum(device, 3).ok());
  ASSERT_TRUE(comm->Broadcast(device, 12, 0).ok());
  ASSERT_TRUE(comm->Wait("the test's collectives").ok());
  // On a stream of the caller's, as the CUDA model uses it.
  cudaStream_t stream = nullptr;
  ASSERT_TRUE(cuda::CudaCall(cudaStreamCreate(&stream), "cudaStreamCreate").ok());
  comm->set_stream(stream);
  ASSERT_TRUE(comm->AllReduceSum(device, 3).ok());
  ASSERT_TRUE(comm->Wait("the test's all-reduce on its own stream").ok());
  std::vector<float> back(3);
  ASSERT_TRUE(cuda::CudaCall(cudaMemcpy(back.data(), device, 12, cudaMemcpyDeviceToHost), "cudaMemcpy").ok());
  cudaFree(device);
  job->communicator.reset();  // Before the stream it uses.
  cudaStreamDestroy(stream);
  EXPECT_EQ(back, host);  // A sum over one rank is the identity.
}

}  // namespace
}  // namespace llama
