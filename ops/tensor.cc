#include "ops/tensor.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace llama {

namespace {

// `bytes` (a multiple of 2 MB) of zero pages at a 2 MB boundary, advised as
// huge pages; nullptr when the kernel refuses the mapping.
void* MapZeroedHugeAligned(size_t bytes) {
  const size_t huge = size_t{2} << 20;
  void* mapped = ::mmap(nullptr, bytes + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) return nullptr;
  const uintptr_t start = reinterpret_cast<uintptr_t>(mapped);
  const uintptr_t aligned = (start + huge - 1) / huge * huge;
  // The slack before and after the aligned span goes back at once.
  if (aligned > start) ::munmap(mapped, aligned - start);
  if (const size_t tail = start + bytes + huge - (aligned + bytes); tail > 0) {
    ::munmap(reinterpret_cast<void*>(aligned + bytes), tail);
  }
  void* data = reinterpret_cast<void*>(aligned);
  ::madvise(data, bytes, MADV_HUGEPAGE);
  return data;
}

}  // namespace

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

absl::StatusOr<Tensor> Tensor::Zeros(DType dtype, std::vector<int64_t> shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  // Large tensors (synthetic weights, KV caches) in 2 MB pages where the
  // kernel gives them (transparent huge pages on request): a decode step
  // streams every byte, and 4 KB pages cost page walks; the bench model's
  // synthetic bf16 decode went from 85-93 to 70-79 ms/step. (Weights mapped
  // from a shard gained nothing from a copy into such pages, 72-81 against
  // 73-77 ms/step, and the copy doubled peak RSS: they stay mapped.)
  //
  // They come zeroed from the kernel (an anonymous mapping) rather than from
  // a memset: a fresh page reads as zero and is faulted in (and, as a huge
  // page, compacted for) only when first written, so a KV cache pool costs
  // nothing to allocate and its unused blocks never cost anything. The
  // memset faulted in every page at load, with direct compaction under
  // MADV_HUGEPAGE: --kv_cache_gb=4 added 7.4 s to load where a plain 4 GB
  // memset takes 1.9 s.
  const size_t huge = size_t{2} << 20;
  if (t.bytes() >= huge) {
    const size_t bytes = (t.bytes() + huge - 1) / huge * huge;
    void* data = MapZeroedHugeAligned(bytes);
    if (data == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("out of memory allocating ", t.DebugString(), " (", bytes, " bytes)"));
    }
    t.storage_ = std::shared_ptr<void>(data, [bytes](void* p) { ::munmap(p, bytes); });
    t.data_ = data;
    t.owned_ = true;
    return t;
  }
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
