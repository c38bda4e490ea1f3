// The GPU's memory bandwidth as a device-to-device copy sees it: the
// yardstick for memory-bound decode steps (tools/bench compares the weight
// bytes a step streams against it).

#ifndef LLAMA_OPS_CUDA_BANDWIDTH_H_
#define LLAMA_OPS_CUDA_BANDWIDTH_H_

#include <cstddef>

#include "absl/status/statusor.h"

namespace llama::cuda {

// GB/s of bytes read plus bytes written by copying `bytes` between two
// device buffers on the current device; the best of a few rounds.
absl::StatusOr<double> MeasureCopyBandwidth(size_t bytes = size_t{1} << 30);

}  // namespace llama::cuda

#endif  // LLAMA_OPS_CUDA_BANDWIDTH_H_
