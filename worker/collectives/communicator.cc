#include "worker/collectives/communicator.h"

#include <cstring>

namespace llama {

absl::Status LocalCommunicator::AllGather(const float* send, size_t count, float* recv) {
  if (recv != send) std::memmove(recv, send, count * sizeof(float));
  return absl::OkStatus();
}

}  // namespace llama
