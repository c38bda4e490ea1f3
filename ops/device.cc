#include "ops/device.h"

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "base/named_values.h"
#include "base/status_macros.h"
#include "third_party/cuda/cuda_build_info.h"

namespace llama {
namespace {

constexpr NamedValues<Device, 2> kDeviceNames({{"cpu", Device::kCpu}, {"cuda", Device::kCuda}});

}  // namespace

absl::string_view DeviceName(Device device) { return kDeviceNames.Name(device); }

bool BuiltWithCuda() { return LLAMA_WITH_CUDA != 0; }

absl::StatusOr<Device> ParseDevice(absl::string_view flag_value) {
  ASSIGN_OR_RETURN(const Device device, kDeviceNames.ParseFlag("device", flag_value));
  if (device == Device::kCuda && !BuiltWithCuda()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "--device=cuda: this binary was built without CUDA (%s). Rebuild on a machine "
        "with the CUDA toolkit (set CUDA_HOME if it is not at /usr/local/cuda), or use "
        "--device=cpu",
        kCudaBuildNote));
  }
  return device;
}

absl::StatusOr<Device> ChooseDevice(absl::string_view flag_value, int visible_gpus) {
  if (!flag_value.empty()) return ParseDevice(flag_value);
  return BuiltWithCuda() && visible_gpus > 0 ? Device::kCuda : Device::kCpu;
}

int RankGpu(int visible_gpus, int local_rank) { return visible_gpus == 1 ? 0 : local_rank; }

}  // namespace llama
