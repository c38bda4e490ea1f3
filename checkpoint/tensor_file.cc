#include "checkpoint/tensor_file.h"

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace llama {

const FileTensor* TensorFile::Find(absl::string_view name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

void TensorFile::AddTensor(FileTensor tensor) {
  by_name_.emplace(tensor.name, tensors_.size());
  tensors_.push_back(std::move(tensor));
}

void TensorFile::SetTensors(std::vector<FileTensor> tensors) {
  tensors_.clear();
  by_name_.clear();
  for (FileTensor& tensor : tensors) AddTensor(std::move(tensor));
}

absl::StatusOr<int64_t> NumElements(absl::Span<const int64_t> shape, absl::string_view what) {
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: negative dimension in shape [%s]", what, absl::StrJoin(shape, ", ")));
    }
    if (dim != 0 && count > INT64_MAX / dim) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: shape [%s] overflows int64", what, absl::StrJoin(shape, ", ")));
    }
    count *= dim;
  }
  return count;
}

}  // namespace llama
