// LLAMA_CPU_ISA=avx2 keeps every AVX-512 and AMX variant out, whatever the
// CPU has: the kernels then in use are those of an AVX2-only CPU. Its own
// test binary, as the variable is read once per process, here before any
// kernel is chosen.

#include <cstdio>
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "ops/cpu/kernel_dispatch.h"
#include "ops/cpu/linear.h"

namespace llama::cpu {
namespace {

TEST(KernelIsaCapTest, Avx2KeepsAvx512AndAmxOut) {
  ASSERT_EQ(setenv("LLAMA_CPU_ISA", "avx2", 1), 0);
  EXPECT_FALSE(CpuRunsAvx512());
  EXPECT_FALSE(CpuRunsAvx512Vnni());
  EXPECT_FALSE(CpuRunsAvx512BwVnni());
  EXPECT_FALSE(CpuRunsAvx512Bf16());
  EXPECT_FALSE(AmxAllowed());
  EXPECT_FALSE(AmxBf16Usable());
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  EXPECT_EQ(CpuRunsAvx2FmaF16c(), avx2);
  const std::string expected = avx2 ? "avx2" : "";
  for (const std::string_view kernel : {PrefillKernel(), Int8Kernel(), Q4KKernel(), Q6KKernel()}) {
    EXPECT_EQ(kernel.find("512"), std::string_view::npos) << kernel;
    if (avx2) {
      EXPECT_EQ(kernel, expected);
    }
  }
  std::printf("with LLAMA_CPU_ISA=avx2: %s prefill, %s int8, %s q4_k, %s q6_k kernels\n",
              std::string(PrefillKernel()).c_str(), std::string(Int8Kernel()).c_str(),
              std::string(Q4KKernel()).c_str(), std::string(Q6KKernel()).c_str());
}

}  // namespace
}  // namespace llama::cpu
