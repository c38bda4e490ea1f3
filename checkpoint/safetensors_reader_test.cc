#include "checkpoint/safetensors_reader.h"

#include <cstring>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_fixture.h"

namespace llama {
namespace {

using ::llama::testing::CheckpointManifest;
using ::llama::testing::Sha256Hex;
using ::testing::HasSubstr;

// A safetensors file: the header text as given (so tests can make it lie)
// and `data` bytes after it.
std::vector<uint8_t> Build(const std::string& header, size_t data_bytes, uint64_t header_size_field = 0) {
  const uint64_t size = header_size_field ? header_size_field : header.size();
  std::vector<uint8_t> bytes(8);
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(size >> (8 * i));
  bytes.insert(bytes.end(), header.begin(), header.end());
  for (size_t i = 0; i < data_bytes; ++i) bytes.push_back(static_cast<uint8_t>(i));
  return bytes;
}

absl::Status Parse(const std::vector<uint8_t>& bytes) {
  return SafetensorsFile::FromBytes(bytes, "test.safetensors").status();
}

TEST(SafetensorsReaderTest, ReadsTensorsAsPyTorchWroteThem) {
  // The Hugging Face fixture's embedding and output are Meta's unchanged
  // (only attention projections are permuted), so PyTorch's manifest of the
  // Meta file gives their exact bytes.
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file =
      SafetensorsFile::Open("tests/fixtures/hf_fixture/tiny_fp32_hf/model.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  const nlohmann::json& meta = CheckpointManifest()["tiny_fp32_mp1/consolidated.00.pth"];
  for (const auto& [hf, ours] : {std::pair<const char*, const char*>{"model.embed_tokens.weight", "tok_embeddings.weight"},
                                 {"lm_head.weight", "output.weight"},
                                 {"model.layers.1.mlp.down_proj.weight", "layers.1.feed_forward.w2.weight"}}) {
    const FileTensor* t = (*file)->Find(hf);
    ASSERT_NE(t, nullptr) << hf;
    EXPECT_EQ(t->dtype, DType::kF32);
    EXPECT_EQ(t->shape, meta[ours]["shape"].get<std::vector<int64_t>>()) << hf;
    EXPECT_EQ(Sha256Hex(t->bytes), meta[ours]["sha256"].get<std::string>()) << hf;
  }
  EXPECT_EQ((*file)->tensors().size(), 2u + 2 * 9 + 1);
  EXPECT_EQ((*file)->metadata().at("format"), "pt");
}

TEST(SafetensorsReaderTest, ReadsEveryDType) {
  const std::string header =
      R"({"a":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]},)"
      R"("b":{"dtype":"I64","shape":[],"data_offsets":[4,12]},)"
      R"("c":{"dtype":"F16","shape":[0,3],"data_offsets":[12,12]},)"
      R"("d":{"dtype":"BOOL","shape":[1],"data_offsets":[12,13]}})";
  const std::vector<uint8_t> bytes = Build(header, 13);
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::FromBytes(bytes, "mem");
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ((*file)->tensors().size(), 4u);
  EXPECT_EQ((*file)->Find("b")->dtype, DType::kI64);
  EXPECT_TRUE((*file)->Find("b")->shape.empty());
  EXPECT_EQ((*file)->Find("b")->bytes.data(), bytes.data() + 8 + header.size() + 4);
  EXPECT_EQ((*file)->Find("c")->bytes.size(), 0u);
}

TEST(SafetensorsReaderTest, RefusesMalformedFilesNamingTheProblem) {
  const auto entry = [](const std::string& name, const std::string& dtype, const std::string& shape,
                        const std::string& offsets) {
    return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":" + offsets + "}";
  };
  const std::string good = entry("w", "F32", "[2,2]", "[0,16]");
  struct Case {
    const char* what;
    std::vector<uint8_t> bytes;
    const char* message;
  };
  const Case cases[] = {
      {"too short", {1, 2, 3}, "too short"},
      {"huge header", Build("{}", 0, kMaxSafetensorsHeaderBytes + 1), "exceeds"},
      {"truncated header", Build("{" + good + "}", 0, 4096), "runs past the end"},
      {"not JSON", Build("{\"w\":", 0), "not a JSON object"},
      {"a JSON array", Build("[1,2]", 0), "not a JSON object"},
      {"truncated data", Build("{" + good + "}", 8), "tensor \"w\": data_offsets [0, 16) lie outside the 8-byte"},
      {"size lies", Build("{" + entry("w", "F32", "[2,3]", "[0,16]") + "}", 16), "tensor \"w\": 16 bytes"},
      {"overlap", Build("{" + good + "," + entry("v", "F32", "[2]", "[8,16]") + "}", 16), "overlap"},
      {"gap", Build("{" + entry("w", "F32", "[2]", "[0,8]") + "," + entry("v", "F32", "[1]", "[12,16]") + "}", 16),
       "bytes [8, 12) of the data section belong to no tensor"},
      {"trailing bytes", Build("{" + good + "}", 20), "bytes [16, 20) of the data section belong to no tensor"},
      {"unsupported dtype", Build("{" + entry("w", "F8_E4M3", "[16]", "[0,16]") + "}", 16),
       "tensor \"w\": dtype \"F8_E4M3\" is not supported"},
      {"negative dimension", Build("{" + entry("w", "F32", "[-2,2]", "[0,16]") + "}", 16),
       "tensor \"w\": a shape dimension is -2"},
      {"float offset", Build("{" + entry("w", "F32", "[2,2]", "[0,16.0]") + "}", 16), "data_offsets[1] is 16.0"},
      {"overflowing shape", Build("{" + entry("w", "F32", "[4294967296,4294967296]", "[0,16]") + "}", 16),
       "overflows"},
      {"missing dtype", Build("{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4), "\"dtype\" missing"},
      {"bad metadata", Build("{\"__metadata__\":{\"format\":1}," + good + "}", 16), "\"__metadata__\" field"},
  };
  for (const Case& c : cases) {
    absl::Status status = Parse(c.bytes);
    EXPECT_FALSE(status.ok()) << c.what;
    EXPECT_THAT(status.message(), HasSubstr(c.message)) << c.what;
    EXPECT_THAT(status.message(), HasSubstr("test.safetensors")) << c.what;
  }
}

TEST(SafetensorsReaderTest, MissingFileIsNamed) {
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open("/nonexistent/model.safetensors");
  ASSERT_FALSE(file.ok());
  EXPECT_THAT(file.status().message(), HasSubstr("/nonexistent/model.safetensors"));
}

}  // namespace
}  // namespace llama
