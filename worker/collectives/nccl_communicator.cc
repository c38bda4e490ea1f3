#include "worker/collectives/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <string>
#include <thread>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "ops/cuda/cuda_libraries.h"
#include "ops/cuda/cuda_status.h"

namespace llama {

using cuda::CudaCall;
using cuda::NcclCall;

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(Rendezvous* rendezvous, int device,
                                                                           std::chrono::milliseconds timeout) {
  const RendezvousOptions& o = rendezvous->options();
  auto comm = std::unique_ptr<NcclCommunicator>(new NcclCommunicator(o.rank, o.world_size, timeout));
  ASSIGN_OR_RETURN(comm->nccl_, cuda::Nccl());
  const cuda::NcclLibrary* nccl = comm->nccl_;
  RETURN_IF_ERROR(CudaCall(cudaSetDevice(device), "cudaSetDevice"));
  ncclUniqueId id;
  if (o.rank == 0) {
    RETURN_IF_ERROR(NcclCall(nccl->ncclGetUniqueId(&id), "ncclGetUniqueId"));
    RETURN_IF_ERROR(rendezvous->store().Set("nccl/id", std::string(id.internal, sizeof id.internal)));
  } else {
    ASSIGN_OR_RETURN(std::string shared, rendezvous->store().Get("nccl/id", o.join_timeout));
    if (shared.size() != sizeof id.internal) {
      return absl::DataLossError(absl::StrFormat("NCCL id from rank 0 has %d bytes; expected %d", shared.size(),
                                                 sizeof id.internal));
    }
    std::memcpy(id.internal, shared.data(), sizeof id.internal);
  }
  cudaStream_t stream = nullptr;
  RETURN_IF_ERROR(CudaCall(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate"));
  comm->own_stream_ = comm->stream_ = stream;
  // Non-blocking, so that a peer dying after the id exchange cannot hang
  // this rank inside ncclCommInitRank: Settle waits with the deadline and
  // aborts. Every later call may then return ncclInProgress too; each goes
  // through Settle.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t raw = nullptr;
  const ncclResult_t started = nccl->ncclCommInitRankConfig(&raw, o.world_size, id, o.rank, &config);
  comm->comm_ = raw;
  if (started != ncclSuccess && started != ncclInProgress) {
    // Whatever was created is aborted in the destructor.
    comm->aborted_ = true;
    return NcclCall(started, "ncclCommInitRankConfig");
  }
  RETURN_IF_ERROR(comm->Settle(started, "ncclCommInitRankConfig (joining the other ranks)"));
  return comm;
}

absl::Status NcclCommunicator::Settle(int result_code, const char* what) {
  ncclResult_t result = static_cast<ncclResult_t>(result_code);
  if (result != ncclSuccess && result != ncclInProgress) return NcclCall(result, what);
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  while (result == ncclInProgress) {
    if (std::chrono::steady_clock::now() >= deadline) return AbortAtDeadline(what);
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    if (ncclResult_t q = nccl_->ncclCommGetAsyncError(comm_, &result); q != ncclSuccess) result = q;
  }
  if (result == ncclSuccess) return absl::OkStatus();
  Abort();
  return NcclCall(result, absl::StrFormat("%s (communicator aborted)", what).c_str());
}

absl::Status NcclCommunicator::AbortAtDeadline(const char* what) {
  Abort();
  return absl::DeadlineExceededError(absl::StrFormat(
      "%s: no progress for %d s; a peer is hung or gone, communicator aborted", what,
      std::chrono::duration_cast<std::chrono::seconds>(timeout_).count()));
}

void NcclCommunicator::Abort() {
  if (comm_ != nullptr) nccl_->ncclCommAbort(comm_);
  comm_ = nullptr;
  aborted_ = true;
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ != nullptr) {
    if (aborted_) {
      nccl_->ncclCommAbort(comm_);
    } else {
      // Non-blocking: the destroy may still be settling when it returns.
      ncclResult_t state = nccl_->ncclCommFinalize(comm_);
      while (state == ncclInProgress) {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
        if (nccl_->ncclCommGetAsyncError(comm_, &state) != ncclSuccess) break;
      }
      if (state == ncclSuccess) {
        nccl_->ncclCommDestroy(comm_);
      } else {
        nccl_->ncclCommAbort(comm_);
      }
    }
  }
  if (own_stream_ != nullptr) cudaStreamDestroy(own_stream_);
}

absl::Status NcclCommunicator::Wait(const char* what) {
  if (comm_ == nullptr) return absl::UnavailableError("NCCL communicator was aborted");
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  while (true) {
    const cudaError_t state = cudaStreamQuery(stream_);
    if (state == cudaSuccess) return absl::OkStatus();
    if (state != cudaErrorNotReady) return CudaCall(state, what);
    ncclResult_t async = ncclSuccess;
    nccl_->ncclCommGetAsyncError(comm_, &async);
    // ncclInProgress: a non-blocking call still settling, not a failure.
    if (async != ncclSuccess && async != ncclInProgress) {
      Abort();
      return NcclCall(async, absl::StrFormat("%s (a peer failed; communicator aborted)", what).c_str());
    }
    if (std::chrono::steady_clock::now() >= deadline) return AbortAtDeadline(what);
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

absl::Status NcclCommunicator::AllReduceSum(float* data, size_t count) {
  if (comm_ == nullptr) return absl::UnavailableError("NCCL communicator was aborted");
  return Settle(nccl_->ncclAllReduce(data, data, count, ncclFloat, ncclSum, comm_, stream_), "ncclAllReduce");
}

absl::Status NcclCommunicator::AllGather(const float* send, size_t count, float* recv) {
  if (comm_ == nullptr) return absl::UnavailableError("NCCL communicator was aborted");
  return Settle(nccl_->ncclAllGather(send, recv, count, ncclFloat, comm_, stream_), "ncclAllGather");
}

absl::Status NcclCommunicator::Broadcast(void* data, size_t bytes, int root) {
  if (comm_ == nullptr) return absl::UnavailableError("NCCL communicator was aborted");
  return Settle(nccl_->ncclBroadcast(data, data, bytes, ncclUint8, root, comm_, stream_), "ncclBroadcast");
}

}  // namespace llama
