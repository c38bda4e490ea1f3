#include "tokenizer/tokenizer.h"

#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tokenizer/tokenizer_fixture.h"

namespace llama {
namespace {

using ::llama::testing::DecodeBase64Field;
using ::llama::testing::FixtureTokenizer;
using ::llama::testing::ReadGolden;
using ::testing::HasSubstr;

TEST(TokenizerTest, SpecialIdsAreLlama2s) {
  const Tokenizer& tokenizer = FixtureTokenizer();
  EXPECT_EQ(tokenizer.bos_id(), 1);
  EXPECT_EQ(tokenizer.eos_id(), 2);
  EXPECT_EQ(tokenizer.pad_id(), -1);
  EXPECT_GT(tokenizer.vocab_size(), 256);
}

// Ids equal Python SentencePiece's (plus the reference's BOS/EOS rule) on
// empty, whitespace, multi-byte, combining, invalid-UTF-8 and long inputs.
TEST(TokenizerTest, EncodeMatchesPythonSentencePiece) {
  const Tokenizer& tokenizer = FixtureTokenizer();
  const nlohmann::json golden = ReadGolden("encode_golden.json");
  ASSERT_GT(golden.size(), 40u);
  for (const nlohmann::json& row : golden) {
    const std::string text = DecodeBase64Field(row, "text_b64");
    absl::StatusOr<std::vector<int>> ids =
        tokenizer.Encode(text, row["bos"].get<bool>(), row["eos"].get<bool>());
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*ids, row["ids"].get<std::vector<int>>()) << "text: \"" << text << "\"";
  }
}

TEST(TokenizerTest, DecodeMatchesPythonSentencePiece) {
  const Tokenizer& tokenizer = FixtureTokenizer();
  const nlohmann::json golden = ReadGolden("decode_golden.json");
  ASSERT_GT(golden.size(), 100u);
  for (const nlohmann::json& row : golden) {
    absl::StatusOr<std::string> text = tokenizer.Decode(row["ids"].get<std::vector<int>>());
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(*text, DecodeBase64Field(row, "text_b64")) << row["ids"].dump();
  }
}

TEST(TokenizerTest, EncodeIsThreadSafe) {
  const Tokenizer& tokenizer = FixtureTokenizer();
  const nlohmann::json golden = ReadGolden("encode_golden.json");
  std::vector<std::thread> threads;
  std::vector<int> mismatches(8, 0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) {
        for (const nlohmann::json& row : golden) {
          absl::StatusOr<std::vector<int>> ids = tokenizer.Encode(
              DecodeBase64Field(row, "text_b64"), row["bos"].get<bool>(), row["eos"].get<bool>());
          if (!ids.ok() || *ids != row["ids"].get<std::vector<int>>()) ++mismatches[t];
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

TEST(TokenizerTest, DecodeRejectsIdsOutsideTheVocabulary) {
  const Tokenizer& tokenizer = FixtureTokenizer();
  absl::StatusOr<std::string> pad = tokenizer.Decode({1, 50, -1});
  EXPECT_EQ(pad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(pad.status().message(), HasSubstr("token id -1 at position 2"));
  EXPECT_THAT(pad.status().message(), HasSubstr("pad id"));
  absl::StatusOr<std::string> big = tokenizer.Decode({tokenizer.vocab_size()});
  EXPECT_THAT(big.status().message(), HasSubstr("outside the vocabulary"));
}

class TokenizerLoadTest : public ::testing::Test {
 protected:
  std::string WriteFile(const std::string& name, const std::string& contents) {
    const std::string path = std::string(getenv("TEST_TMPDIR")) + "/" + name;
    std::ofstream(path, std::ios::binary) << contents;
    return path;
  }
};

TEST_F(TokenizerLoadTest, MissingFileNamesThePath) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::Load("/nonexistent/tokenizer.model");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(t.status().message(), HasSubstr("\"/nonexistent/tokenizer.model\": no such file"));
}

TEST_F(TokenizerLoadTest, EmptyFileNamesThePath) {
  const std::string path = WriteFile("empty.model", "");
  absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::Load(path);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr(path));
  EXPECT_THAT(t.status().message(), HasSubstr("is empty"));
}

TEST_F(TokenizerLoadTest, CorruptFileNamesThePath) {
  std::ifstream real(testing::TokenizerFixturePath("tokenizer.model"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(real)), std::istreambuf_iterator<char>());
  for (const std::string& contents :
       {std::string("not a model at all"), bytes.substr(0, bytes.size() / 3)}) {
    const std::string path = WriteFile("corrupt.model", contents);
    absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::Load(path);
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(t.status().message(), HasSubstr(path));
    EXPECT_THAT(t.status().message(), HasSubstr("is neither a SentencePiece model"));
  }
}

TEST_F(TokenizerLoadTest, DirectoryIsRejected) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::Load(getenv("TEST_TMPDIR"));
  EXPECT_THAT(t.status().message(), HasSubstr("is a directory"));
}

}  // namespace
}  // namespace llama
