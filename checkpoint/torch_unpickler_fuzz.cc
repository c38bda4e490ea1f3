// Fuzz target: the restricted unpickler on arbitrary bytes.
#include <cstddef>
#include <cstdint>

#include "checkpoint/torch_unpickler.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  llama::UnpickleStateDict({data, size}, "fuzz").IgnoreError();
  return 0;
}
