// The tensor type of the engine: a dtype, a shape and contiguous row-major
// storage, either owned (activations, caches; 64-byte aligned, zeroed) or
// borrowed (weights inside a memory-mapped shard, never copied).
//
// Layout convention, written once: shapes list the slowest dimension first;
// a weight of a linear layer is [out_features, in_features] as in PyTorch,
// and activations are [tokens, features]. Storage is row-major, except for
// a CPU model's linear weights, packed once at load into the panels the
// CPU kernels read (TensorLayout::kLinearPanels, ops/cpu/linear.h).

#ifndef LLAMA_OPS_TENSOR_H_
#define LLAMA_OPS_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ops/dtype.h"

namespace llama {

enum class TensorLayout {
  kRowMajor,
  // [out, in] stored as panels of 32 output rows, each [in][32], the last
  // one padded with zeros; for q8_0, groups of eight rows interleaved four
  // bytes at a time (cpu::PackLinearWeight, ops/cpu/linear_q8.h).
  kLinearPanels,
};

class Tensor {
 public:
  Tensor() = default;

  // Owned, zero-filled storage; ResourceExhausted (with the size) when the
  // allocation fails.
  static absl::StatusOr<Tensor> Zeros(DType dtype, std::vector<int64_t> shape);
  // A read-only view of `data`, which must outlive every use of the tensor.
  static Tensor View(DType dtype, std::vector<int64_t> shape, const void* data);

  // The same storage with another shape and layout, for a packing routine
  // that allocated it (the storage must hold what `layout` says `shape`
  // takes).
  Tensor Relabeled(std::vector<int64_t> shape, TensorLayout layout) const {
    Tensor t = *this;
    t.shape_ = std::move(shape);
    t.layout_ = layout;
    return t;
  }

  DType dtype() const { return dtype_; }
  TensorLayout layout() const { return layout_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_[i]; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const;
  size_t bytes() const { return TensorBytes(dtype_, numel()); }
  bool empty() const { return data_ == nullptr; }

  const void* raw() const { return data_; }
  // Mutable access; only for owned tensors.
  void* mutable_raw() const { return owned_ ? const_cast<void*>(data_) : nullptr; }
  const float* f32() const { return static_cast<const float*>(data_); }
  float* mutable_f32() const { return static_cast<float*>(mutable_raw()); }

  // "bf16[4096, 11008]".
  std::string DebugString() const;

 private:
  DType dtype_ = DType::kF32;
  std::vector<int64_t> shape_;
  std::shared_ptr<void> storage_;  // Null for views.
  const void* data_ = nullptr;
  bool owned_ = false;
  TensorLayout layout_ = TensorLayout::kRowMajor;
};

}  // namespace llama

#endif  // LLAMA_OPS_TENSOR_H_
