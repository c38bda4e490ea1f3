// Collectives between the tensor-parallel ranks of one model.
//
// The model's layers call these where fairscale's parallel layers
// communicate: an all-reduce after each row-parallel linear (attention wo,
// FFN w2) and an all-gather after the parallel embedding and the output
// projection. A world of one needs no communication (LocalCommunicator);
// TCP (CPU) and NCCL (GPU) implementations join several processes.

#ifndef LLAMA_WORKER_COLLECTIVES_COMMUNICATOR_H_
#define LLAMA_WORKER_COLLECTIVES_COMMUNICATOR_H_

#include <cstddef>

#include "absl/status/status.h"

namespace llama {

// Called from one thread at a time; every rank must make the same calls in
// the same order with the same counts.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // data[i] = sum over ranks of data[i], in place.
  virtual absl::Status AllReduceSum(float* data, size_t count) = 0;
  // The same over `rows` rows of `width`, where each element's sum may
  // depend on its column but not on `rows` (the TCP ring's is then the same
  // bit for bit whatever the batch: batch invariance). This default, for
  // collectives that cannot promise it, is AllReduceSum.
  virtual absl::Status AllReduceSumRows(float* data, size_t rows, size_t width) {
    return AllReduceSum(data, rows * width);
  }
  // recv = concatenation over ranks (rank order) of each rank's `count`
  // floats of send; recv holds world_size() * count floats.
  virtual absl::Status AllGather(const float* send, size_t count, float* recv) = 0;
  // Copies `bytes` bytes at `data` from rank `root` to every other rank.
  virtual absl::Status Broadcast(void* data, size_t bytes, int root) = 0;
};

// The world of one process.
class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  absl::Status AllReduceSum(float*, size_t) override { return absl::OkStatus(); }
  absl::Status AllGather(const float* send, size_t count, float* recv) override;
  absl::Status Broadcast(void*, size_t, int) override { return absl::OkStatus(); }
};

}  // namespace llama

#endif  // LLAMA_WORKER_COLLECTIVES_COMMUNICATOR_H_
