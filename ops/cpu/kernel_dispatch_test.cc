// The registry's choice (the first variant this CPU runs, else the last),
// what forcing a variant does and refuses, and that the CPU checks nest as
// the instruction sets do.

#include "ops/cpu/kernel_dispatch.h"

#include <cstdio>

#include <gtest/gtest.h>

namespace llama::cpu {
namespace {

bool Never() { return false; }

using Dispatch = KernelDispatch<int, 3>;

TEST(KernelDispatchTest, ChoosesTheFirstVariantTheCpuRuns) {
  const Dispatch dispatch({{{"wide", Never, 1}, {"narrow", AnyX86_64, 2}, {"portable", AnyX86_64, 3}}});
  EXPECT_EQ(dispatch.name(), "narrow");
  EXPECT_EQ(dispatch.kernel(), 2);
}

TEST(KernelDispatchTest, FallsBackToTheLastVariant) {
  const Dispatch dispatch({{{"wide", Never, 1}, {"narrow", Never, 2}, {"portable", Never, 3}}});
  EXPECT_EQ(dispatch.name(), "portable");
  EXPECT_EQ(dispatch.kernel(), 3);
}

TEST(KernelDispatchTest, ForcesOnlyAVariantTheCpuRuns) {
  Dispatch dispatch({{{"wide", Never, 1}, {"narrow", AnyX86_64, 2}, {"portable", AnyX86_64, 3}}});
  EXPECT_TRUE(dispatch.ForceForTesting("portable"));
  EXPECT_EQ(dispatch.name(), "portable");
  EXPECT_EQ(dispatch.kernel(), 3);
  EXPECT_FALSE(dispatch.ForceForTesting("wide"));
  EXPECT_FALSE(dispatch.ForceForTesting("sse9"));
  EXPECT_EQ(dispatch.name(), "portable");
  EXPECT_TRUE(dispatch.ForceForTesting("narrow"));
  EXPECT_EQ(dispatch.kernel(), 2);
}

TEST(KernelDispatchTest, CpuChecksNestAsTheInstructionSetsDo) {
  std::printf("this CPU: avx2+fma %d, +f16c %d, x86-64-v3 %d, avx512 %d, avx512vnni %d, avx512bf16 %d\n",
              CpuRunsAvx2Fma(), CpuRunsAvx2FmaF16c(), CpuRunsX86_64V3(), CpuRunsAvx512(), CpuRunsAvx512Vnni(),
              CpuRunsAvx512Bf16());
  EXPECT_TRUE(AnyX86_64());
  EXPECT_TRUE(!CpuRunsAvx2FmaF16c() || CpuRunsAvx2Fma());
  EXPECT_TRUE(!CpuRunsX86_64V3() || CpuRunsAvx2FmaF16c());
  EXPECT_TRUE(!CpuRunsAvx512Vnni() || CpuRunsAvx2FmaF16c());
}

}  // namespace
}  // namespace llama::cpu
