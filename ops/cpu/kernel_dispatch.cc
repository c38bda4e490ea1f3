#include "ops/cpu/kernel_dispatch.h"

#include <cstdlib>
#include <string_view>

#include <glog/logging.h>

namespace llama::cpu {
namespace {

// LLAMA_CPU_ISA=avx2 keeps the AVX-512 (and AMX) variants out, so that one
// machine can measure and test the path of CPUs that have only AVX2 (as
// oneDNN's ONEDNN_MAX_CPU_ISA does); unset or "native": whatever the CPU
// has. Read once.
bool Avx512Allowed() {
  static const bool allowed = [] {
    const char* value = std::getenv("LLAMA_CPU_ISA");
    const std::string_view isa = value == nullptr ? "native" : value;
    if (isa == "avx2") return false;
    if (isa != "native") {
      LOG(WARNING) << "LLAMA_CPU_ISA=" << isa << ": expected native or avx2; using what the CPU has";
    }
    return true;
  }();
  return allowed;
}

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
  return Avx512Allowed() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx2");
}

bool CpuRunsAvx512Vnni() {
  __builtin_cpu_init();
  return Avx512Allowed() && Avx2FmaF16c() && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl");
}

bool CpuRunsAvx512BwVnni() {
  __builtin_cpu_init();
  return Avx512Allowed() && Avx2FmaF16c() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
}

bool CpuRunsAvx512Bf16() {
  __builtin_cpu_init();
  return Avx512Allowed() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
}

bool AmxAllowed() { return Avx512Allowed(); }

bool AnyX86_64() { return true; }

}  // namespace llama::cpu
