// Assertions for fuzz targets: a span a reader returns must lie inside the
// input it was given. Touching a span's ends only crashes on an unmapped
// page; this catches any out-of-bounds span, even by one byte, and aborts
// (the fuzz driver and libFuzzer report an abort as a failure).

#ifndef LLAMA_THIRD_PARTY_FUZZ_CHECK_H_
#define LLAMA_THIRD_PARTY_FUZZ_CHECK_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "absl/types/span.h"

namespace llama::fuzz {

inline void ExpectWithin(absl::Span<const uint8_t> part, const uint8_t* data, size_t size, const char* what) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data), end = begin + size;
  const uintptr_t p = reinterpret_cast<uintptr_t>(part.data());
  if (part.empty()) return;
  if (p < begin || p > end || part.size() > end - p) {
    std::fprintf(stderr, "fuzz: %s [%p, +%zu) lies outside the input [%p, +%zu)\n", what,
                 static_cast<const void*>(part.data()), part.size(), static_cast<const void*>(data), size);
    std::abort();
  }
}

}  // namespace llama::fuzz

#endif  // LLAMA_THIRD_PARTY_FUZZ_CHECK_H_
