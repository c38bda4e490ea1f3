// Fuzz target: the zip container parser on arbitrary bytes.
#include <cstddef>
#include <cstdint>

#include "checkpoint/zip_reader.h"
#include "third_party/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<llama::ZipArchive> archive = llama::ZipArchive::Parse({data, size}, "fuzz");
  if (!archive.ok()) return 0;
  for (const llama::ZipEntry& entry : archive->entries()) {
    llama::fuzz::ExpectWithin(archive->Data(entry), data, size, "a zip entry's data");
  }
  return 0;
}
