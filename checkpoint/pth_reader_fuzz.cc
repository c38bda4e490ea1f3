// Fuzz target: a whole .pth file (zip, pickle, storage bounds) on arbitrary bytes.
#include <cstddef>
#include <cstdint>

#include "checkpoint/pth_reader.h"
#include "third_party/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<std::unique_ptr<llama::PthFile>> pth = llama::PthFile::FromBytes({data, size}, "fuzz");
  if (!pth.ok()) return 0;
  for (const llama::FileTensor& t : (*pth)->tensors()) llama::fuzz::ExpectWithin(t.bytes, data, size, "a tensor's bytes");
  return 0;
}
