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

}  // namespace
}  // namespace llama
