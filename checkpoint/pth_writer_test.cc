#include "checkpoint/pth_writer.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_fixture.h"
#include "checkpoint/pth_reader.h"

namespace llama {
namespace {

using ::llama::testing::Sha256Hex;

template <typename T>
absl::Span<const uint8_t> Bytes(const std::vector<T>& v) {
  return {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(T)};
}

// Our file, read back by our reader and by real PyTorch (torch.load), gives
// the same tensors bit for bit.
TEST(PthWriterTest, TorchLoadReadsWhatWeWrite) {
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/written.pth";
  const std::vector<float> f32 = {1.5f, -2.0f, 3.25f, 0.0f, 1e-20f, -7.0f};
  const std::vector<uint16_t> bf16 = {0x3F80, 0xC000, 0x7F80};
  const std::vector<int64_t> i64 = {1, -2, int64_t{1} << 40};
  {
    absl::StatusOr<std::unique_ptr<PthWriter>> writer = PthWriter::Create(path, "written");
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE((*writer)->Add("layers.0.w", DType::kF32, {2, 3}, Bytes(f32)).ok());
    ASSERT_TRUE((*writer)->Add("norm", DType::kBF16, {3}, Bytes(bf16)).ok());
    ASSERT_TRUE((*writer)->Add("ids", DType::kI64, {3}, Bytes(i64)).ok());
    EXPECT_FALSE((*writer)->Add("bad", DType::kF32, {4}, Bytes(f32)).ok());
    ASSERT_TRUE((*writer)->Finish().ok());
  }
  absl::StatusOr<std::unique_ptr<PthFile>> pth = PthFile::Open(path);
  ASSERT_TRUE(pth.ok()) << pth.status();
  ASSERT_EQ((*pth)->tensors().size(), 3u);
  EXPECT_EQ((*pth)->Find("layers.0.w")->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Sha256Hex((*pth)->Find("layers.0.w")->bytes), Sha256Hex(Bytes(f32)));

  const std::string script = std::string(getenv("TEST_TMPDIR")) + "/load.py";
  const std::string out = std::string(getenv("TEST_TMPDIR")) + "/load.json";
  std::ofstream(script) << "import hashlib, json, sys, torch\n"
                           "sd = torch.load(sys.argv[1])\n"
                           "json.dump({k: [str(v.dtype), list(v.shape), hashlib.sha256(v.contiguous().view(torch.uint8)"
                           ".numpy().tobytes()).hexdigest()] for k, v in sd.items()}, open(sys.argv[2], 'w'))\n";
  ASSERT_EQ(std::system(("/usr/bin/python3 " + script + " " + path + " " + out).c_str()), 0)
      << "HINT: needs Debian's python3-torch (third_party/setup.sh)";
  std::ifstream in(out);
  const nlohmann::json loaded = nlohmann::json::parse(in);
  EXPECT_EQ(loaded["layers.0.w"][0], "torch.float32");
  EXPECT_EQ(loaded["layers.0.w"][1], nlohmann::json({2, 3}));
  EXPECT_EQ(loaded["layers.0.w"][2], Sha256Hex(Bytes(f32)));
  EXPECT_EQ(loaded["norm"][0], "torch.bfloat16");
  EXPECT_EQ(loaded["norm"][2], Sha256Hex(Bytes(bf16)));
  EXPECT_EQ(loaded["ids"][0], "torch.int64");
  EXPECT_EQ(loaded["ids"][2], Sha256Hex(Bytes(i64)));
}

TEST(PthWriterTest, UnfinishedWriterLeavesNothing) {
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/abandoned.pth";
  {
    absl::StatusOr<std::unique_ptr<PthWriter>> writer = PthWriter::Create(path, "abandoned");
    ASSERT_TRUE(writer.ok());
  }
  EXPECT_NE(access(path.c_str(), F_OK), 0);
  EXPECT_NE(access((path + ".tmp").c_str(), F_OK), 0);
}

}  // namespace
}  // namespace llama
