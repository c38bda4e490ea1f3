// PyTorch's typed storage classes (torch.FloatStorage, ...): how a pickled
// state dict names each tensor's element type. Read by the unpickler,
// written by the .pth writer.

#ifndef LLAMA_CHECKPOINT_TORCH_STORAGE_H_
#define LLAMA_CHECKPOINT_TORCH_STORAGE_H_

#include "ops/dtype.h"

namespace llama {

struct TorchStorageClass {
  const char* name;  // In module torch.
  DType dtype;
};

inline constexpr TorchStorageClass kTorchStorageClasses[] = {
    {"FloatStorage", DType::kF32},  {"HalfStorage", DType::kF16},  {"BFloat16Storage", DType::kBF16},
    {"DoubleStorage", DType::kF64}, {"LongStorage", DType::kI64},  {"IntStorage", DType::kI32},
    {"ShortStorage", DType::kI16},  {"CharStorage", DType::kI8},   {"ByteStorage", DType::kU8},
    {"BoolStorage", DType::kBool},
};

// The storage class of `dtype`, or null (q8_0: PyTorch has no such storage).
inline const char* TorchStorageClassName(DType dtype) {
  for (const TorchStorageClass& c : kTorchStorageClasses) {
    if (c.dtype == dtype) return c.name;
  }
  return nullptr;
}

}  // namespace llama

#endif  // LLAMA_CHECKPOINT_TORCH_STORAGE_H_
