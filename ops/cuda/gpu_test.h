// Tests of the CUDA backend run where a GPU is visible
// (tests/gpu/run_gpu_checks.sh) and skip, saying why, where none is: CI's
// machines build them with the toolkit but have no device.

#ifndef LLAMA_OPS_CUDA_GPU_TEST_H_
#define LLAMA_OPS_CUDA_GPU_TEST_H_

#include <string>

#include <gtest/gtest.h>

#include "absl/status/statusor.h"
#include "ops/cuda/cuda_status.h"

// Skips the calling test (or fixture SetUp) with the runtime's reason when
// no GPU is visible; fails it when the runtime cannot be asked.
#define LLAMA_SKIP_WITHOUT_GPU()                                                      \
  do {                                                                                \
    std::string why_none;                                                             \
    absl::StatusOr<int> visible = ::llama::cuda::VisibleDeviceCount(&why_none);       \
    ASSERT_TRUE(visible.ok()) << visible.status();                                    \
    if (*visible == 0) GTEST_SKIP() << "no CUDA device visible: " << why_none;        \
  } while (0)

#endif  // LLAMA_OPS_CUDA_GPU_TEST_H_
