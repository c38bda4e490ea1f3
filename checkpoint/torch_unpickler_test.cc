#include "checkpoint/torch_unpickler.h"

#include <fstream>
#include <iterator>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace llama {
namespace {

using ::testing::HasSubstr;
using namespace std::string_literals;

absl::StatusOr<std::vector<PickledTensor>> Unpickle(const std::string& pickle) {
  return UnpickleStateDict(
      absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(pickle.data()), pickle.size()), "f.pth");
}

// What torch.save writes for {"w": <2x3 float tensor at offset 4 of a
// 24-element storage>} (protocol 2; bytes copied from such a file).
const std::string kStateDict =
    "\200\002}q\000X\001\000\000\000wq\001ctorch._utils\n_rebuild_tensor_v2"
    "\nq\002((X\007\000\000\000storageq\003ctorch\nFloatStorage\nq\004X\001"
    "\000\000\0000q\005X\003\000\000\000cpuq\006K\030tq\007QK\004K\002K\003"
    "\206q\010K\003K\001\206q\011\211ccollections\nOrderedDict\nq\n)Rq\013t"
    "q\014Rq\015s."s;

TEST(TorchUnpicklerTest, ReadsAStateDict) {
  absl::StatusOr<std::vector<PickledTensor>> tensors = Unpickle(kStateDict);
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  ASSERT_EQ(tensors->size(), 1u);
  const PickledTensor& t = (*tensors)[0];
  EXPECT_EQ(t.name, "w");
  EXPECT_EQ(t.storage_key, "0");
  EXPECT_EQ(t.dtype, DType::kF32);
  EXPECT_EQ(t.storage_numel, 24);
  EXPECT_EQ(t.storage_offset, 4);
  EXPECT_EQ(t.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t.strides, (std::vector<int64_t>{3, 1}));
}

TEST(TorchUnpicklerTest, RefusesToCallArbitraryGlobals) {
  // pickle.dumps of os.system("ls") and builtins.eval("1"), protocol 2.
  for (const auto& [pickle, name] : {
           std::pair<std::string, std::string>{"\x80\x02" "cos\nsystem\nq\x00X\x02\x00\x00\x00lsq\x01\x85q\x02Rq\x03."s,
                                               "\"os.system\""},
           {"\x80\x02" "cbuiltins\neval\nX\x01\x00\x00\x00" "1\x85R."s, "\"builtins.eval\""},
           {"\x80\x02}(X\x01\x00\x00\x00w\x8c\x05posix\x8c\x06system\x93u."s, "\"posix.system\""},
       }) {
    absl::StatusOr<std::vector<PickledTensor>> result = Unpickle(pickle);
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_THAT(result.status().message(), HasSubstr(name));
    EXPECT_THAT(result.status().message(), HasSubstr("not allowed"));
    EXPECT_THAT(result.status().message(), HasSubstr("f.pth: data.pkl offset "));
  }
}

TEST(TorchUnpicklerTest, ErrorsNameTheOffset) {
  EXPECT_THAT(Unpickle("\x80\x02}i").status().message(),
              HasSubstr("offset 3: opcode 0x69 ('i') is not allowed"));
  EXPECT_THAT(Unpickle("\x80\x02}X\xff\x00\x00\x00" "ab"s).status().message(), HasSubstr("truncated"));
  EXPECT_THAT(Unpickle("\x80\x02}").status().message(), HasSubstr("offset 3: truncated pickle"));
  EXPECT_THAT(Unpickle("\x80\x09}.").status().message(), HasSubstr("pickle protocol 9"));
  EXPECT_THAT(Unpickle("\x80\x02h\x05.").status().message(), HasSubstr("memo index 5 was never stored"));
  EXPECT_THAT(Unpickle("\x80\x02N."s).status().message(),
              HasSubstr("holds a None; expected a state dict"));
  EXPECT_THAT(Unpickle("\x80\x02}X\x01\x00\x00\x00wK\x01s."s).status().message(),
              HasSubstr("entry \"w\" is a int; expected a tensor"));
  EXPECT_THAT(Unpickle("\x80\x02t.").status().message(), HasSubstr("no mark"));
  EXPECT_THAT(Unpickle("\x80\x02."s).status().message(), HasSubstr("underflow"));
}

TEST(TorchUnpicklerTest, Protocol4Opcodes) {
  // {"a": True} with FRAME, SHORT_BINUNICODE and MEMOIZE is not a state
  // dict, but must parse up to that verdict.
  const std::string pickle = "\x80\x04\x95\x0a\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\x01" "a\x94\x88s."s;
  EXPECT_THAT(Unpickle(pickle).status().message(), HasSubstr("entry \"a\" is a bool"));
}

// The two inputs libFuzzer once reported as leaks (a list appended to
// itself; a dict set as its own key and value): containers live in the
// unpickler's arena, so they are errors like any other non-state-dict and
// free everything (LSan checks under --config=asan). Also fuzz seeds.
TEST(TorchUnpicklerTest, SelfContainingContainersAreErrorsThatFreeEverything) {
  for (const char* name : {"unpickler_list_in_itself.pkl", "unpickler_dict_in_itself.pkl"}) {
    const std::string path = std::string("checkpoint/testdata/") + name;
    std::ifstream in(path, std::ios::binary);
    ASSERT_TRUE(in) << path;
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_FALSE(bytes.empty()) << path;
    const absl::StatusOr<std::vector<PickledTensor>> tensors = Unpickle(bytes);
    ASSERT_FALSE(tensors.ok()) << path;
    EXPECT_THAT(tensors.status().message(), HasSubstr("f.pth")) << tensors.status();
  }
}

}  // namespace
}  // namespace llama
