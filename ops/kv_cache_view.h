// Where a step's keys and values live, the same on every device: slot s's
// cache starts at element s * slot_stride of k and of v ([capacity,
// n_kv_heads, head_dim] per slot, of `dtype`: f32, or bf16/f16 for half the
// memory). The pointers are in the memory of the device that runs the ops.

#ifndef LLAMA_OPS_KV_CACHE_VIEW_H_
#define LLAMA_OPS_KV_CACHE_VIEW_H_

#include <cstdint>

#include "ops/dtype.h"

namespace llama {

struct KvCacheView {
  void* k = nullptr;
  void* v = nullptr;
  DType dtype = DType::kF32;
  int64_t slot_stride = 0;  // Elements.
};

}  // namespace llama

#endif  // LLAMA_OPS_KV_CACHE_VIEW_H_
