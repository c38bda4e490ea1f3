#include "ops/cpu/simd.h"

#include "ops/cpu/kernel_dispatch.h"

namespace llama::cpu::simd {
namespace {

constexpr std::string_view kV3 = "x86-64-v3", kBaseline = "baseline";

// The kernel is whether to take the x86-64-v3 versions.
KernelDispatch<bool, 2>& Versions() {
  static KernelDispatch<bool, 2> versions({{{kV3, CpuRunsX86_64V3, true}, {kBaseline, AnyX86_64, false}}});
  return versions;
}

}  // namespace

bool UseV3() { return Versions().kernel(); }

bool ForceV3ForTesting(bool v3) { return Versions().ForceForTesting(v3 ? kV3 : kBaseline); }

const char* KernelVersion() { return UseV3() ? kV3.data() : kBaseline.data(); }

}  // namespace llama::cpu::simd
