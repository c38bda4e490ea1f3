#include "ops/tensor.h"

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
  const size_t bytes = (t.bytes() + 63) / 64 * 64;
  void* data = std::aligned_alloc(64, bytes == 0 ? 64 : bytes);
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
