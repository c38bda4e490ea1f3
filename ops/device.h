// Which compute backend a process runs on, and whether this build has it.
//
// The CUDA backend exists only in binaries built where Bazel found a CUDA
// toolkit (third_party/cuda/cuda_configure.bzl). Asking for it elsewhere is
// an error that says so, rather than a link failure or a silent CPU run.

#ifndef LLAMA_OPS_DEVICE_H_
#define LLAMA_OPS_DEVICE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace llama {

enum class Device { kCpu, kCuda };

// "cpu" or "cuda".
absl::string_view DeviceName(Device device);

// True when this binary was compiled with the CUDA backend.
bool BuiltWithCuda();

// Parses a --device flag value ("cpu" or "cuda", case-sensitive). "cuda" in
// a binary built without CUDA is FailedPrecondition, naming how the build
// looked for the toolkit and how to rebuild with it.
absl::StatusOr<Device> ParseDevice(absl::string_view flag_value);

// The device for `flag_value` (--device; empty: not given) where
// `visible_gpus` GPUs are visible: the flag's (ParseDevice), else CUDA when
// this binary has the backend and sees a GPU, else the CPU. The one rule
// for the launcher's plan and for a worker started on its own.
absl::StatusOr<Device> ChooseDevice(absl::string_view flag_value, int visible_gpus);

// The GPU, among the `visible_gpus` this process sees, of the rank with
// `local_rank` on its node: the only one (the launcher gives each rank its
// own CUDA_VISIBLE_DEVICES), else the LOCAL_RANK-th (a torchrun-style start
// that shows every rank every GPU).
int RankGpu(int visible_gpus, int local_rank);

}  // namespace llama

#endif  // LLAMA_OPS_DEVICE_H_
