// Fuzz target: the zip container parser on arbitrary bytes.
#include <cstddef>
#include <cstdint>

#include "checkpoint/zip_reader.h"

// Reads through here keep the compiler from dropping the bounds probes.
volatile uint8_t g_sink = 0;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<llama::ZipArchive> archive = llama::ZipArchive::Parse({data, size}, "fuzz");
  if (!archive.ok()) return 0;
  // Every entry's bytes must lie inside the input: touch their ends.
  for (const llama::ZipEntry& entry : archive->entries()) {
    absl::Span<const uint8_t> bytes = archive->Data(entry);
    if (!bytes.empty()) g_sink ^= bytes.front() ^ bytes.back();
  }
  return 0;
}
