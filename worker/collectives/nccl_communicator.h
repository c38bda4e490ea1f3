// Collectives for GPU ranks through NCCL: the communicator is created from a
// unique id that rank 0 publishes in the rendezvous store.
//
// Buffers are device pointers (the CUDA backend's activations). Every
// collective is only enqueued, on the stream the model gives (set_stream:
// so it follows the kernels that produce its input, and a CUDA graph can
// capture it) and complete once Wait returns. Wait polls the stream, so a
// peer that dies or hangs is noticed: an NCCL async error or the
// collective deadline aborts the communicator (ncclCommAbort) and returns
// an error naming what was waited for, never a hang (FasterTransformer's
// ftNcclStreamSynchronize does the same). The model waits once per step.
// Creation is bounded the same way: the communicator is non-blocking, so a
// peer that dies after the id exchange cannot hang ncclCommInitRank.

#ifndef LLAMA_WORKER_COLLECTIVES_NCCL_COMMUNICATOR_H_
#define LLAMA_WORKER_COLLECTIVES_NCCL_COMMUNICATOR_H_

#include <chrono>
#include <memory>

#include "absl/status/statusor.h"
#include "worker/collectives/communicator.h"
#include "worker/collectives/rendezvous.h"

// Keeps nccl.h and cuda_runtime.h out of this header.
struct ncclComm;
struct CUstream_st;
namespace llama::cuda {
struct NcclLibrary;
}  // namespace llama::cuda

namespace llama {

class NcclCommunicator final : public Communicator {
 public:
  // Uses device `device` (normally LOCAL_RANK); exchanges the NCCL id
  // through `rendezvous`.
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Create(Rendezvous* rendezvous, int device,
                                                                  std::chrono::milliseconds timeout);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  // Device pointers; enqueued only (see above).
  absl::Status AllReduceSum(float* data, size_t count) override;
  absl::Status AllGather(const float* send, size_t count, float* recv) override;
  absl::Status Broadcast(void* data, size_t bytes, int root) override;

  // Collectives go on `stream` from now on (the communicator's own until
  // then, and again after set_stream(nullptr)); the caller keeps it alive.
  void set_stream(CUstream_st* stream) { stream_ = stream != nullptr ? stream : own_stream_; }
  // Waits for everything enqueued on the stream, watching for NCCL errors
  // and the deadline; `what` names the wait in errors.
  absl::Status Wait(const char* what);

 private:
  NcclCommunicator(int rank, int world_size, std::chrono::milliseconds timeout)
      : rank_(rank), world_size_(world_size), timeout_(timeout) {}

  // The communicator is non-blocking: a call's result may be ncclInProgress
  // until its state settles. Waits for that (the deadline, then abort) and
  // returns the outcome; `what` names the call in errors.
  absl::Status Settle(int result, const char* what);
  void Abort();
  // Aborts and says that `what` made no progress within the deadline.
  absl::Status AbortAtDeadline(const char* what);

  int rank_;
  int world_size_;
  std::chrono::milliseconds timeout_;
  const cuda::NcclLibrary* nccl_ = nullptr;  // Opened by Create (ops/cuda/cuda_libraries.h).
  ncclComm* comm_ = nullptr;
  CUstream_st* own_stream_ = nullptr;
  CUstream_st* stream_ = nullptr;
  bool aborted_ = false;
};

}  // namespace llama

#endif  // LLAMA_WORKER_COLLECTIVES_NCCL_COMMUNICATOR_H_
