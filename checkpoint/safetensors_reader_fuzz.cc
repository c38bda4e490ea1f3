// Fuzz target: a whole .safetensors file (header size, JSON header, offsets) on arbitrary bytes.
#include <cstddef>
#include <cstdint>

#include "checkpoint/safetensors_reader.h"
#include "third_party/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<std::unique_ptr<llama::SafetensorsFile>> file =
      llama::SafetensorsFile::FromBytes({data, size}, "fuzz");
  if (!file.ok()) return 0;
  for (const llama::FileTensor& t : (*file)->tensors()) {
    llama::fuzz::ExpectWithin(t.bytes, data, size, "a tensor's bytes");
  }
  return 0;
}
