#include "ops/tensor.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

namespace llama {
namespace {

// Pages of [data, data + bytes) in memory now.
size_t ResidentPages(const void* data, size_t bytes) {
  const size_t page = sysconf(_SC_PAGESIZE);
  std::vector<unsigned char> resident((bytes + page - 1) / page);
  EXPECT_EQ(mincore(const_cast<void*>(data), bytes, resident.data()), 0);
  size_t n = 0;
  for (unsigned char r : resident) n += r & 1;
  return n;
}

// A large tensor (a KV cache) costs nothing to allocate: it reads as zero
// and none of its pages is in memory until written. (A memset touched every
// page: seconds for a 4 GB cache.)
TEST(TensorTest, LargeZerosAreZeroPagesNotYetTouched) {
  absl::StatusOr<Tensor> t = Tensor::Zeros(DType::kF32, {256, 1024, 1024});  // 1 GB.
  ASSERT_TRUE(t.ok()) << t.status();
  const uintptr_t address = reinterpret_cast<uintptr_t>(t->raw());
  EXPECT_EQ(address % (size_t{2} << 20), 0u) << "2 MB aligned, for huge pages";
  EXPECT_EQ(ResidentPages(t->raw(), t->bytes()), 0u);
  const float* values = static_cast<const float*>(t->raw());
  for (int64_t i = 0; i < t->numel(); i += 4096 * 64) EXPECT_EQ(values[i], 0.0f) << i;
  static_cast<float*>(t->mutable_raw())[t->numel() - 1] = 1.0f;
  EXPECT_EQ(values[t->numel() - 1], 1.0f);
}

TEST(TensorTest, SmallZerosAreZeroAndAligned) {
  absl::StatusOr<Tensor> t = Tensor::Zeros(DType::kF32, {3, 5});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t->raw()) % 64, 0u);
  for (int i = 0; i < 15; ++i) EXPECT_EQ(static_cast<const float*>(t->raw())[i], 0.0f);
}

}  // namespace
}  // namespace llama
