// The run-time choice among a CPU kernel's instruction-set variants (AVX-512,
// AVX2, portable...), one registry for every kernel that has them: each
// variant is a name (what tests and the bench print as the kernel in use),
// whether this CPU runs it, and the kernel itself (a function pointer or a
// small struct of them). Internal to ops/cpu.

#ifndef LLAMA_OPS_CPU_KERNEL_DISPATCH_H_
#define LLAMA_OPS_CPU_KERNEL_DISPATCH_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <string_view>

namespace llama::cpu {

// What this CPU runs, as each variant's target attribute needs it
// (__builtin_cpu_supports). Each set is the one its variants were checked
// against when written; they are not merged, so that every CPU keeps the
// variants it took before.
// AVX2 and FMA.
bool CpuRunsAvx2Fma();
// AVX2, FMA and F16C.
bool CpuRunsAvx2FmaF16c();
// x86-64-v3 as GCC's target attribute means it: AVX2, FMA, F16C, BMI, BMI2
// and MOVBE.
bool CpuRunsX86_64V3();
// AVX-512 F, VL, BW and DQ (x86-64-v4), and AVX2.
bool CpuRunsAvx512();
// AVX2, FMA, F16C, AVX-512 VNNI and VL.
bool CpuRunsAvx512Vnni();
// AVX2, FMA, F16C and AVX-512 F, BW, VL and VNNI.
bool CpuRunsAvx512BwVnni();
// AVX-512 F, BW, VL and BF16.
bool CpuRunsAvx512Bf16();
// Whether the AMX variants may run where the CPU has AMX (LLAMA_CPU_ISA,
// which the AVX-512 checks above follow too: avx2 keeps both out).
bool AmxAllowed();
// Every x86-64 CPU: the portable variants.
bool AnyX86_64();

template <typename Kernel>
struct KernelVariant {
  std::string_view name;
  bool (*cpu_runs)();
  Kernel kernel;
};

// A kernel's variants, best first, the last one portable. The first this CPU
// runs is chosen when the dispatch is built (a function-local static, so once,
// on first use) and stays chosen unless a test forces another.
template <typename Kernel, size_t kCount>
class KernelDispatch {
 public:
  using Variant = KernelVariant<Kernel>;

  explicit KernelDispatch(const std::array<Variant, kCount>& variants)
      : variants_(variants), chosen_(&FirstThisCpuRuns(variants_)) {}

  const Variant& chosen() const { return *chosen_.load(); }
  const Kernel& kernel() const { return chosen().kernel; }
  std::string_view name() const { return chosen().name; }

  // Tests: use the variant named `name` from now on, if this CPU runs it;
  // false, changing nothing, otherwise.
  bool ForceForTesting(std::string_view name) {
    for (const Variant& v : variants_) {
      if (v.name == name && v.cpu_runs()) {
        chosen_.store(&v);
        return true;
      }
    }
    return false;
  }

 private:
  static const Variant& FirstThisCpuRuns(const std::array<Variant, kCount>& variants) {
    for (const Variant& v : variants) {
      if (v.cpu_runs()) return v;
    }
    return variants.back();
  }

  const std::array<Variant, kCount> variants_;
  std::atomic<const Variant*> chosen_;
};

}  // namespace llama::cpu

#endif  // LLAMA_OPS_CPU_KERNEL_DISPATCH_H_
