#include "checkpoint/tensor_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace llama {
namespace {

using ::testing::HasSubstr;

// The smallest reader: tensors given outright.
class ListedFile : public TensorFile {
 public:
  explicit ListedFile(std::vector<FileTensor> tensors) : TensorFile("listed") { SetTensors(std::move(tensors)); }
};

TEST(TensorFileTest, FindsTensorsByNameInOrder) {
  const uint8_t bytes[8] = {};
  const ListedFile file({{"b", DType::kF32, {1}, absl::MakeConstSpan(bytes, 4)},
                         {"a", DType::kF16, {2}, absl::MakeConstSpan(bytes + 4, 4)}});
  EXPECT_EQ(file.path(), "listed");
  ASSERT_EQ(file.tensors().size(), 2u);
  EXPECT_EQ(file.tensors()[0].name, "b");
  ASSERT_NE(file.Find("a"), nullptr);
  EXPECT_EQ(file.Find("a")->dtype, DType::kF16);
  EXPECT_EQ(file.Find("a")->bytes.data(), bytes + 4);
  EXPECT_EQ(file.Find("c"), nullptr);
}

TEST(TensorFileTest, NumElementsChecksSignAndOverflow) {
  EXPECT_EQ(*NumElements({2, 3, 4}, "t"), 24);
  EXPECT_EQ(*NumElements({}, "t"), 1);
  EXPECT_THAT(NumElements({1LL << 40, 1LL << 40}, "t").status().message(), HasSubstr("t: shape [1099511627776, "));
  EXPECT_THAT(NumElements({3, -1}, "t").status().message(), HasSubstr("t: negative dimension in shape [3, -1]"));
}

}  // namespace
}  // namespace llama
