#include "ops/device.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace llama {
namespace {

using ::testing::HasSubstr;

TEST(DeviceTest, ParsesCpu) {
  absl::StatusOr<Device> device = ParseDevice("cpu");
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_EQ(*device, Device::kCpu);
  EXPECT_EQ(DeviceName(*device), "cpu");
}

TEST(DeviceTest, CudaFollowsTheBuild) {
  absl::StatusOr<Device> device = ParseDevice("cuda");
  if (BuiltWithCuda()) {
    ASSERT_TRUE(device.ok()) << device.status();
    EXPECT_EQ(*device, Device::kCuda);
  } else {
    EXPECT_EQ(device.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(device.status().message(), HasSubstr("built without CUDA"));
    EXPECT_THAT(device.status().message(), HasSubstr("CUDA_HOME"));
  }
}

TEST(DeviceTest, RejectsUnknownNames) {
  for (const char* bad : {"", "gpu", "CUDA", "cpu "}) {
    absl::StatusOr<Device> device = ParseDevice(bad);
    EXPECT_EQ(device.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(device.status().message(), HasSubstr("expected \"cpu\" or \"cuda\"")) << bad;
  }
  EXPECT_EQ(ParseDevice("gpu").status(), absl::InvalidArgumentError("--device=\"gpu\": expected \"cpu\" or \"cuda\""));
  EXPECT_EQ(DeviceName(Device::kCuda), "cuda");
}

// --device decides; without it, a GPU where this build can use one.
TEST(DeviceTest, ChoosesTheFlagsElseAVisibleGpuThisBuildCanUse) {
  EXPECT_EQ(*ChooseDevice("cpu", 8), Device::kCpu);
  EXPECT_EQ(*ChooseDevice("", 0), Device::kCpu);
  EXPECT_EQ(*ChooseDevice("", 2), BuiltWithCuda() ? Device::kCuda : Device::kCpu);
  EXPECT_EQ(ChooseDevice("gpu", 2).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DeviceTest, ARankUsesItsOwnGpuOrItsLocalRanks) {
  EXPECT_EQ(RankGpu(1, 3), 0);
  EXPECT_EQ(RankGpu(8, 3), 3);
}

}  // namespace
}  // namespace llama
