// A restricted unpickler for the data.pkl record of a torch.save'd state dict.
//
// It understands exactly what torch.save writes for a dict (or OrderedDict)
// of tensors, pickle protocols 2 to 5: the opcodes for containers, ints,
// floats, strings and memo; the globals collections.OrderedDict,
// torch._utils._rebuild_tensor_v2, torch._utils._rebuild_parameter and the
// typed storage classes (torch.FloatStorage, ...); and persistent ids of
// the form ('storage', <storage class>, key, location, numel). It never
// imports or calls anything: any other global or opcode is an error naming
// it and its byte offset in data.pkl.

#ifndef LLAMA_CHECKPOINT_TORCH_UNPICKLER_H_
#define LLAMA_CHECKPOINT_TORCH_UNPICKLER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ops/dtype.h"

namespace llama {

// One tensor of the state dict, as the pickle describes it.
struct PickledTensor {
  std::string name;          // The state dict key.
  std::string storage_key;   // data/<storage_key> in the archive.
  DType dtype = DType::kF32;
  int64_t storage_numel = 0;   // Elements in the whole storage.
  int64_t storage_offset = 0;  // In elements.
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // In elements.
};

// Parses `pickle` (the bytes of data.pkl). The top-level object must be a
// dict of string keys to tensors. `source` prefixes error messages.
absl::StatusOr<std::vector<PickledTensor>> UnpickleStateDict(absl::Span<const uint8_t> pickle,
                                                             const std::string& source);

}  // namespace llama

#endif  // LLAMA_CHECKPOINT_TORCH_UNPICKLER_H_
