// SliceCopier on runs longer than its 16 MiB buffer: blocks copied as they
// are leave in whole blocks and arrive whole, whatever the block size.

#include "checkpoint/slice_copier.h"

#include <cstdint>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "base/progress.h"
#include "ops/ggml_blocks.h"

namespace llama {
namespace {

TEST(SliceCopierTest, CopiedBlocksLongerThanTheBufferArriveWhole) {
  for (const auto& [dtype, ggml] : {std::pair{DType::kQ8_0, GgmlType::kQ8_0}, std::pair{DType::kQ4_K, GgmlType::kQ4_K},
                                    std::pair{DType::kQ6_K, GgmlType::kQ6_K}}) {
    const int64_t cols = 4096, rows = 8192;  // 19 to 36 MB: past the 16 MiB buffer.
    std::vector<uint8_t> bytes(TensorBytes(dtype, rows * cols));
    std::iota(bytes.begin(), bytes.end(), uint8_t{0});
    // The copier drops the source's pages once copied (a mapping's, in the
    // converter): this one's then read as zeros.
    const std::vector<uint8_t> expected = bytes;
    const TensorSpec spec{"output.weight", {rows, cols}, SplitKind::kReplicated};
    SourcePart part{bytes, dtype, {rows, cols}, 0, 0, {}, static_cast<uint32_t>(ggml)};
    std::vector<uint8_t> written;
    std::vector<size_t> writes;
    ProgressBar progress("copy", bytes.size(), nullptr);
    SliceCopier copier(
        [&](absl::Span<const uint8_t> b) {
          written.insert(written.end(), b.begin(), b.end());
          writes.push_back(b.size());
          return absl::OkStatus();
        },
        &progress);
    const absl::Status status = copier.Copy(spec, {part}, DimRange{0, rows}, dtype);
    ASSERT_TRUE(status.ok()) << DTypeName(dtype) << ": " << status;
    EXPECT_TRUE(written == expected) << DTypeName(dtype);
    for (size_t size : writes) EXPECT_EQ(size % TensorBytes(dtype, BlockElements(dtype)), 0u) << DTypeName(dtype);
  }
}

}  // namespace
}  // namespace llama
