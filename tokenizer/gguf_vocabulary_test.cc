// Small vocabularies written as GGUF metadata by hand: what is rebuilt from
// them, and the errors. (checkpoint/gguf_llama_test.cc exports the fixture
// tokenizers to GGUF files and rebuilds them from those.)

#include "tokenizer/gguf_vocabulary.h"

#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "tokenizer/byte_level_bpe.h"
#include "tokenizer/tiktoken_model.h"
#include "tokenizer/tokenizer.h"

namespace llama {
namespace {

using ::testing::HasSubstr;
using Metadata = std::vector<std::pair<std::string, nlohmann::json>>;

void Set(Metadata& m, const std::string& key, nlohmann::json value) {
  for (auto& [name, old] : m) {
    if (name == key) {
      old = std::move(value);
      return;
    }
  }
  m.emplace_back(key, std::move(value));
}

// <unk> <s> </s>, the 256 byte pieces, then ▁, a and ▁a (▁a scoring highest).
Metadata SentencePieceMetadata() {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<float> scores = {0, 0, 0};
  std::vector<int> types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(absl::StrFormat("<0x%02X>", b));
    scores.push_back(0);
    types.push_back(6);
  }
  for (const char* piece : {"\xE2\x96\x81", "a", "\xE2\x96\x81" "a"}) {
    tokens.push_back(piece);
    scores.push_back(-static_cast<float>(tokens.size()) / 1000 + (tokens.size() == 262 ? 1 : 0));
    types.push_back(1);
  }
  return {{"tokenizer.ggml.model", "llama"},     {"tokenizer.ggml.tokens", tokens},
          {"tokenizer.ggml.scores", scores},     {"tokenizer.ggml.token_type", types},
          {"tokenizer.ggml.bos_token_id", 1},    {"tokenizer.ggml.eos_token_id", 2}};
}

// The 256 bytes, "ab" made by one merge, then Llama 3's special tokens.
Metadata Gpt2Metadata() {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(ByteLevelText(std::string(1, static_cast<char>(b))));
  tokens.push_back("ab");
  for (const std::string& special : internal_tokenizer::Llama3SpecialTokens()) tokens.push_back(special);
  return {{"tokenizer.ggml.model", "gpt2"},
          {"tokenizer.ggml.pre", "llama-bpe"},
          {"tokenizer.ggml.tokens", tokens},
          {"tokenizer.ggml.merges", std::vector<std::string>{"a b"}},
          {"tokenizer.ggml.bos_token_id", 257},
          {"tokenizer.ggml.eos_token_id", 258}};
}

std::unique_ptr<Tokenizer> Rebuilt(const Metadata& m) {
  absl::StatusOr<std::string> model = TokenizerModelFromGguf(m, "x.gguf");
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return nullptr;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromSerialized(*model, "x.gguf");
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
}

std::string ErrorOf(const Metadata& m) { return std::string(TokenizerModelFromGguf(m, "x.gguf").status().message()); }

TEST(GgufVocabularyTest, SentencePieceMergesByScoreAndFallsBackToBytes) {
  const std::unique_ptr<Tokenizer> tokenizer = Rebuilt(SentencePieceMetadata());
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->family(), Tokenizer::Family::kSentencePiece);
  EXPECT_EQ(tokenizer->vocab_size(), 262);
  EXPECT_EQ(tokenizer->unk_id(), 0);
  // A space before the text (add_dummy_prefix), ▁a merged, "b" as its byte.
  EXPECT_EQ(*tokenizer->Encode("a b", true, false), (std::vector<int>{1, 261, 259, 3 + 'b'}));
  EXPECT_EQ(*tokenizer->Decode({261, 259, 3 + 'b'}), "a b");
  // Whitespace runs are kept, as Llama 2 keeps them.
  EXPECT_EQ(*tokenizer->Encode("a  a", false, false), (std::vector<int>{261, 259, 261}));
}

TEST(GgufVocabularyTest, SpacePrefixFlagIsHonoured) {
  Metadata m = SentencePieceMetadata();
  Set(m, "tokenizer.ggml.add_space_prefix", false);
  const std::unique_ptr<Tokenizer> tokenizer = Rebuilt(m);
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(*tokenizer->Encode("a", false, false), (std::vector<int>{260}));
}

TEST(GgufVocabularyTest, Gpt2UndoesTheByteMappingAndNumbersLlama3sSpecials) {
  const std::unique_ptr<Tokenizer> tokenizer = Rebuilt(Gpt2Metadata());
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->family(), Tokenizer::Family::kTiktoken);
  EXPECT_EQ(tokenizer->vocab_size(), 257 + 256);
  EXPECT_EQ(*tokenizer->Encode("ab a\n", false, false), (std::vector<int>{256, ' ', 'a', '\n'}));
  EXPECT_EQ(tokenizer->SpecialId("<|eot_id|>"), 257 + 9);
  // llama.cpp writes Llama 3 Instruct models with <|eot_id|> as their EOS.
  Metadata instruct = Gpt2Metadata();
  Set(instruct, "tokenizer.ggml.eos_token_id", 257 + 9);
  EXPECT_NE(Rebuilt(instruct), nullptr);
}

std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

// llama.cpp's converter writes a Llama 3 GGUF from tokenizer.json: the vocab
// and added tokens by id, the merges as the file lists them (several per
// token). From the tiktoken fixture's tokenizer.json, that gives the
// fixture's ranks file back.
TEST(GgufVocabularyTest, Gpt2VocabularyAsLlamaCppConvertsTokenizerJsonGivesTheRanksBack) {
  const nlohmann::json hf = nlohmann::json::parse(ReadFile("tests/fixtures/tokenizer_json_fixture/tokenizer.json"));
  std::vector<std::string> tokens(hf["model"]["vocab"].size() + hf["added_tokens"].size());
  for (const auto& [token, id] : hf["model"]["vocab"].items()) tokens[id.get<int>()] = token;
  for (const nlohmann::json& added : hf["added_tokens"]) tokens[added["id"].get<int>()] = added["content"];
  Metadata m = Gpt2Metadata();
  Set(m, "tokenizer.ggml.tokens", tokens);
  Set(m, "tokenizer.ggml.merges", hf["model"]["merges"]);
  Set(m, "tokenizer.ggml.bos_token_id", 512);
  Set(m, "tokenizer.ggml.eos_token_id", 513);
  absl::StatusOr<std::string> ranks = TokenizerModelFromGguf(m, "llama3.gguf");
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  EXPECT_EQ(*ranks, ReadFile("tests/fixtures/tiktoken_fixture/tokenizer.model"));
}

TEST(GgufVocabularyTest, ErrorsNameTheFileTheKeyAndWhatWasExpected) {
  Metadata m = SentencePieceMetadata();
  Set(m, "tokenizer.ggml.model", "bert");
  EXPECT_THAT(ErrorOf(m), HasSubstr("x.gguf: metadata key \"tokenizer.ggml.model\" is \"bert\"; expected \"llama\" "
                                    "(SentencePiece: Llama 2) or \"gpt2\" (byte-level BPE: Llama 3)"));
  m = SentencePieceMetadata();
  m.erase(m.begin() + 2);  // The scores.
  EXPECT_THAT(ErrorOf(m), HasSubstr("metadata key \"tokenizer.ggml.scores\" is missing; expected an array of 262 "
                                    "numbers, one per token"));
  m = SentencePieceMetadata();
  std::vector<int> types = m[3].second;
  types[200] = 7;
  Set(m, "tokenizer.ggml.token_type", types);
  EXPECT_THAT(ErrorOf(m), HasSubstr("\"tokenizer.ggml.token_type\" has 7 at index 200; expected an array of 262 "
                                    "token types 1-6, one per token"));
  m = SentencePieceMetadata();
  Set(m, "tokenizer.ggml.bos_token_id", 260);
  EXPECT_THAT(ErrorOf(m),
              HasSubstr("\"tokenizer.ggml.bos_token_id\" is 260, \"a\" of type 1; expected a control token"));
  Set(m, "tokenizer.ggml.bos_token_id", 262);
  EXPECT_THAT(ErrorOf(m), HasSubstr("\"tokenizer.ggml.bos_token_id\" is 262; expected a token id below 262"));

  m = Gpt2Metadata();
  Set(m, "tokenizer.ggml.pre", "qwen2");
  EXPECT_THAT(ErrorOf(m), HasSubstr("\"tokenizer.ggml.pre\" is \"qwen2\"; expected \"llama-bpe\""));
  m = Gpt2Metadata();
  Set(m, "tokenizer.ggml.bos_token_id", 258);
  EXPECT_THAT(ErrorOf(m), HasSubstr("\"tokenizer.ggml.bos_token_id\" is 258; expected the tokenizer's BOS, 257"));
  m = Gpt2Metadata();
  Set(m, "tokenizer.ggml.eos_token_id", 5);
  EXPECT_THAT(ErrorOf(m), HasSubstr("\"tokenizer.ggml.eos_token_id\" is 5; expected the tokenizer's EOS, 258"));
  m = Gpt2Metadata();
  Set(m, "tokenizer.ggml.merges", std::vector<std::string>{"a c"});
  EXPECT_THAT(ErrorOf(m), HasSubstr("x.gguf: tokenizer.ggml.merges[0] (\"a\" + \"c\"): \"ac\" is not in "
                                    "tokenizer.ggml.tokens"));
  m = Gpt2Metadata();
  Set(m, "tokenizer.ggml.merges", std::vector<std::string>{"ab"});
  EXPECT_THAT(ErrorOf(m),
              HasSubstr("\"tokenizer.ggml.merges\" has \"ab\" at index 0; expected an array of \"<left> <right>\""));
}

}  // namespace
}  // namespace llama
