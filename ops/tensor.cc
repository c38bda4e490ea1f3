#include "ops/tensor.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace llama {

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

absl::StatusOr<Tensor> Tensor::Zeros(DType dtype, std::vector<int64_t> shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  // 64 bytes: a cache line, and the widest SIMD register.
  // Large tensors (synthetic weights, KV caches) in 2 MB pages where the
  // kernel gives them (transparent huge pages on request): a decode step
  // streams every byte, and 4 KB pages cost page walks; the bench model's
  // synthetic bf16 decode went from 85-93 to 70-79 ms/step. (Weights mapped
  // from a shard gained nothing from a copy into such pages, 72-81 against
  // 73-77 ms/step, and the copy doubled peak RSS: they stay mapped.)
  const size_t huge = size_t{2} << 20;
  const bool large = t.bytes() >= huge;
  const size_t bytes = large ? (t.bytes() + huge - 1) / huge * huge : (t.bytes() + 63) / 64 * 64;
  void* data = std::aligned_alloc(large ? huge : 64, bytes == 0 ? 64 : bytes);
  if (large && data != nullptr) ::madvise(data, bytes, MADV_HUGEPAGE);
  if (data == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("out of memory allocating ", t.DebugString(), " (", bytes, " bytes)"));
  }
  std::memset(data, 0, bytes);
  t.storage_ = std::shared_ptr<void>(data, &std::free);
  t.data_ = data;
  t.owned_ = true;
  return t;
}

Tensor Tensor::View(DType dtype, std::vector<int64_t> shape, const void* data) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.data_ = data;
  return t;
}

std::string Tensor::DebugString() const {
  return absl::StrCat(DTypeName(dtype_), "[", absl::StrJoin(shape_, ", "), "]");
}

}  // namespace llama
