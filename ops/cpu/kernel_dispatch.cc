#include "ops/cpu/kernel_dispatch.h"

namespace llama::cpu {
namespace {

bool Avx2Fma() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
bool Avx2FmaF16c() { return Avx2Fma() && __builtin_cpu_supports("f16c"); }

}  // namespace

bool CpuRunsAvx2Fma() {
  __builtin_cpu_init();
  return Avx2Fma();
}

bool CpuRunsAvx2FmaF16c() {
  __builtin_cpu_init();
  return Avx2FmaF16c();
}

bool CpuRunsX86_64V3() {
  __builtin_cpu_init();
  return Avx2FmaF16c() && __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") &&
         __builtin_cpu_supports("movbe");
}

bool CpuRunsAvx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx2");
}

bool CpuRunsAvx512Vnni() {
  __builtin_cpu_init();
  return Avx2FmaF16c() && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl");
}

bool CpuRunsAvx512BwVnni() {
  __builtin_cpu_init();
  return Avx2FmaF16c() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
}

bool CpuRunsAvx512Bf16() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
}

bool AnyX86_64() { return true; }

}  // namespace llama::cpu
