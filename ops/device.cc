#include "ops/device.h"

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "third_party/cuda/cuda_build_info.h"

namespace llama {

absl::string_view DeviceName(Device device) {
  switch (device) {
    case Device::kCpu:
      return "cpu";
    case Device::kCuda:
      return "cuda";
  }
  return "unknown";
}

bool BuiltWithCuda() { return LLAMA_WITH_CUDA != 0; }

absl::StatusOr<Device> ParseDevice(absl::string_view flag_value) {
  if (flag_value == "cpu") return Device::kCpu;
  if (flag_value == "cuda") {
    if (!BuiltWithCuda()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "--device=cuda: this binary was built without CUDA (%s). Rebuild on a machine "
          "with the CUDA toolkit (set CUDA_HOME if it is not at /usr/local/cuda), or use "
          "--device=cpu",
          kCudaBuildNote));
    }
    return Device::kCuda;
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("--device=\"%s\": expected \"cpu\" or \"cuda\"", flag_value));
}

}  // namespace llama
