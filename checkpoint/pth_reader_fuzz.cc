// Fuzz target: a whole .pth file (zip, pickle, storage bounds) on arbitrary bytes.
#include <cstddef>
#include <cstdint>

#include "checkpoint/pth_reader.h"

// Reads through here keep the compiler from dropping the bounds probes.
volatile uint8_t g_sink = 0;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<std::unique_ptr<llama::PthFile>> pth = llama::PthFile::FromBytes({data, size}, "fuzz");
  if (!pth.ok()) return 0;
  for (const llama::PthTensor& t : (*pth)->tensors()) {
    if (!t.bytes.empty()) g_sink ^= t.bytes.front() ^ t.bytes.back();
  }
  return 0;
}
