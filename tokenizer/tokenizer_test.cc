#include "tokenizer/tokenizer.h"

#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "tokenizer/tokenizer_fixture.h"

namespace llama {
namespace {

using ::llama::testing::DecodeBase64Field;
using ::llama::testing::EditedFixtureModel;
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

// The fixture's vocabulary with `edit` applied, loaded.
std::unique_ptr<Tokenizer> EditedFixture(const std::function<void(SentencePieceSpec&)>& edit) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> edited =
      Tokenizer::FromSerialized(EditedFixtureModel(edit), "edited fixture");
  EXPECT_TRUE(edited.ok()) << edited.status();
  return edited.ok() ? *std::move(edited) : nullptr;
}

// A draft model's tokenizer must be its model's, token for token: a copy
// passes; one token's text or score, the size, or the EOS id changed fails,
// naming the first difference.
TEST(TokenizerTest, CheckSameVocabularyFindsTheFirstDifference) {
  const Tokenizer& fixture = FixtureTokenizer();
  std::unique_ptr<Tokenizer> copy = EditedFixture([](SentencePieceSpec&) {});
  ASSERT_NE(copy, nullptr);
  EXPECT_TRUE(CheckSameVocabulary(fixture, *copy).ok()) << CheckSameVocabulary(fixture, *copy);

  std::unique_ptr<Tokenizer> text = EditedFixture([](SentencePieceSpec& spec) { spec.pieces[300].text += "x"; });
  ASSERT_NE(text, nullptr);
  const absl::Status differs = CheckSameVocabulary(fixture, *text);
  EXPECT_EQ(differs.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(differs.message()), HasSubstr("token 300 is"));

  std::unique_ptr<Tokenizer> score = EditedFixture([](SentencePieceSpec& spec) { spec.pieces[299].score -= 1; });
  ASSERT_NE(score, nullptr);
  EXPECT_THAT(std::string(CheckSameVocabulary(fixture, *score).message()), HasSubstr("token 299 is"));

  std::unique_ptr<Tokenizer> shorter = EditedFixture([](SentencePieceSpec& spec) { spec.pieces.pop_back(); });
  ASSERT_NE(shorter, nullptr);
  EXPECT_THAT(std::string(CheckSameVocabulary(fixture, *shorter).message()),
              HasSubstr(absl::StrFormat("have %d and %d tokens", fixture.vocab_size(), fixture.vocab_size() - 1)));

  std::unique_ptr<Tokenizer> eos = EditedFixture([](SentencePieceSpec& spec) {
    std::swap(spec.pieces[1], spec.pieces[2]);
    std::swap(spec.bos_id, spec.eos_id);
  });
  ASSERT_NE(eos, nullptr);
  EXPECT_THAT(std::string(CheckSameVocabulary(fixture, *eos).message()), HasSubstr("BOS and EOS are tokens 1 and 2"));
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
