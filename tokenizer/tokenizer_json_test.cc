#include "tokenizer/tokenizer_json.h"

#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace llama {
namespace {

using ::testing::HasSubstr;

constexpr char kRanks[] = "tests/fixtures/tiktoken_fixture/tokenizer.model";
constexpr char kJson[] = "tests/fixtures/tokenizer_json_fixture/tokenizer.json";
constexpr char kArrayMerges[] = "tests/fixtures/tokenizer_json_fixture/tokenizer_array_merges.json";

std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

std::unique_ptr<Tokenizer> MustLoad(const std::string& path) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::Load(path);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
}

// The fixture's tokenizer.json with `edit` applied, as a string.
template <typename Edit>
std::string Edited(Edit edit) {
  nlohmann::json tokenizer = nlohmann::json::parse(ReadFile(kJson));
  edit(tokenizer);
  return tokenizer.dump();
}

std::string ErrorOf(const std::string& contents) {
  return std::string(TiktokenRanksFromTokenizerJson(contents, "x/tokenizer.json").status().message());
}

// The tokenizer.json made from the ranks file turns back into that file, in
// both merge forms, and Tokenizer::Load gives the same ids.
TEST(TokenizerJsonTest, GivesBackTheRanksFileItWasMadeFrom) {
  for (const char* path : {kJson, kArrayMerges}) {
    SCOPED_TRACE(path);
    absl::StatusOr<std::string> ranks = TiktokenRanksFromTokenizerJson(ReadFile(path), path);
    ASSERT_TRUE(ranks.ok()) << ranks.status();
    EXPECT_EQ(*ranks, ReadFile(kRanks));
    const std::unique_ptr<Tokenizer> from_json = MustLoad(path);
    const std::unique_ptr<Tokenizer> from_ranks = MustLoad(kRanks);
    ASSERT_NE(from_json, nullptr);
    ASSERT_NE(from_ranks, nullptr);
    EXPECT_EQ(from_json->family(), Tokenizer::Family::kTiktoken);
    EXPECT_EQ(from_json->vocab_size(), from_ranks->vocab_size());
    EXPECT_EQ(from_json->stop_ids(), from_ranks->stop_ids());
    for (const char* text : {"Hello  world\n\n 123456 don't", "\xE6\x9D\xB1\xE4\xBA\xAC \xF0\x9F\xA6\x99",
                             "<|begin_of_text|>hi<|eot_id|>", "   ", ""}) {
      EXPECT_EQ(*from_json->Encode(text, true, false), *from_ranks->Encode(text, true, false)) << text;
    }
  }
}

// Llama 3.1 and later name some reserved special tokens; the ids we use keep theirs.
TEST(TokenizerJsonTest, TakesLlama31sNamesForReservedTokens) {
  const std::string renamed = Edited([](nlohmann::json& t) {
    t["added_tokens"][8]["content"] = "<|eom_id|>";
    t["added_tokens"][10]["content"] = "<|python_tag|>";
  });
  EXPECT_TRUE(TiktokenRanksFromTokenizerJson(renamed, "x").ok());
}

TEST(TokenizerJsonTest, RefusesLlama2sSentencePieceStyleJsonPointingToTokenizerModel) {
  const char* llama2 = R"({"normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"}]},
      "pre_tokenizer": null, "added_tokens": [],
      "model": {"type": "BPE", "byte_fallback": true, "fuse_unk": true, "unk_token": "<unk>",
                "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2}, "merges": []}})";
  EXPECT_THAT(ErrorOf(llama2),
              HasSubstr("x/tokenizer.json\": model is a BPE with byte_fallback; expected Llama 3's byte-level BPE "
                        "(for a SentencePiece model such as Llama 2's, pass its tokenizer.model)"));
  const std::string metaspace = Edited([](nlohmann::json& t) { t["pre_tokenizer"] = {{"type", "Metaspace"}}; });
  EXPECT_THAT(ErrorOf(metaspace), HasSubstr("pre_tokenizer is {\"type\":\"Metaspace\"}; expected Llama 3's"));
  EXPECT_THAT(ErrorOf(R"({"model": {"type": "Unigram"}})"), HasSubstr("model is a Unigram"));
}

TEST(TokenizerJsonTest, RefusesWhatWouldTokenizeOtherwise) {
  const std::string pattern = Edited([](nlohmann::json& t) {
    t["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\s+";
  });
  EXPECT_THAT(ErrorOf(pattern), HasSubstr("expected an Isolated Split on Llama 3's pattern"));
  const std::string normalizer = Edited([](nlohmann::json& t) { t["normalizer"] = {{"type", "NFC"}}; });
  EXPECT_THAT(ErrorOf(normalizer), HasSubstr("normalizer is {\"type\":\"NFC\"}; expected null"));
  const std::string chatml = Edited([](nlohmann::json& t) { t["added_tokens"][0]["content"] = "<|im_start|>"; });
  EXPECT_THAT(ErrorOf(chatml),
              HasSubstr("added_tokens: token 512 is \"<|im_start|>\"; expected \"<|begin_of_text|>\""));
  const std::string few = Edited([](nlohmann::json& t) { t["added_tokens"].erase(255); });
  EXPECT_THAT(ErrorOf(few), HasSubstr("added_tokens has 255 special tokens after the 512 base tokens"));
  const std::string order =
      Edited([](nlohmann::json& t) { std::swap(t["model"]["merges"][0], t["model"]["merges"][100]); });
  EXPECT_THAT(ErrorOf(order),
              ::testing::ContainsRegex("model.merges\\[1\\] makes token [0-9]+ after an earlier merge made token"));
  const std::string unknown = Edited([](nlohmann::json& t) { t["model"]["merges"][3] = "x yz"; });
  EXPECT_THAT(ErrorOf(unknown), HasSubstr("model.merges[3] (\"x\" + \"yz\"): \"yz\" is not in model.vocab"));
  const std::string gap = Edited([](nlohmann::json& t) { t["model"]["vocab"].erase("Ġt"); });
  EXPECT_THAT(ErrorOf(gap), HasSubstr("model.vocab has 511 base tokens; expected ids 0..511, each once"));
  const std::string not_byte_level = Edited([](nlohmann::json& t) {
    nlohmann::json& vocab = t["model"]["vocab"];
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
      if (*it == 300) {
        vocab.erase(it);
        break;
      }
    }
    vocab["\xE2\x96\x81the"] = 300;
  });
  EXPECT_THAT(ErrorOf(not_byte_level), HasSubstr("U+2581 at byte 0, which is not one of GPT-2's 256"));
}

TEST(TokenizerJsonTest, SaysWhatAFileThatIsNoTokenizerJsonIs) {
  EXPECT_TRUE(LooksLikeTokenizerJson("  \n{\"model\": {}}"));
  EXPECT_FALSE(LooksLikeTokenizerJson("IQ== 0\n"));
  EXPECT_THAT(ErrorOf("{}"),
              HasSubstr("tokenizer \"x/tokenizer.json\" is JSON without a \"model\" object; expected Hugging Face's "
                        "tokenizer.json"));
  EXPECT_THAT(ErrorOf("{\"model\": "), HasSubstr("is not valid JSON"));
}

}  // namespace
}  // namespace llama
