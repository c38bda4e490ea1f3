#include "ops/cpu/simd.h"

#include <atomic>

namespace llama::cpu::simd {
namespace {

// x86-64-v3 as GCC's target attribute means it (the instructions the
// kernels' v3 versions may use).
bool CpuRunsV3() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c") &&
         __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("movbe");
}

std::atomic<bool>& V3() {
  static std::atomic<bool> v3{CpuRunsV3()};
  return v3;
}

}  // namespace

bool UseV3() { return V3().load(std::memory_order_relaxed); }

bool ForceV3ForTesting(bool v3) {
  if (v3 && !CpuRunsV3()) return false;
  V3().store(v3);
  return true;
}

const char* KernelVersion() { return UseV3() ? "x86-64-v3" : "baseline"; }

}  // namespace llama::cpu::simd
