// Fuzz target: the shard header and index validation on arbitrary bytes.
#include <cstddef>
#include <cstdint>

#include "checkpoint/shard_format.h"
#include "third_party/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<std::unique_ptr<llama::ShardReader>> reader = llama::ShardReader::FromBytes({data, size}, "fuzz");
  if (!reader.ok()) return 0;
  (*reader)->VerifyChecksums().IgnoreError();  // Reads every tensor byte: all must be in bounds.
  for (const llama::shard::TensorEntry& e : (*reader)->index().tensors()) {
    absl::StatusOr<llama::ShardTensor> tensor = (*reader)->Tensor(e.name());
    if (tensor.ok()) llama::fuzz::ExpectWithin(tensor->bytes, data, size, "a shard tensor's bytes");
  }
  return 0;
}
