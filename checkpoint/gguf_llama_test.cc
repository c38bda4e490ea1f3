#include "checkpoint/gguf_llama.h"

#include <cstdlib>
#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "checkpoint/gguf_reader.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/gguf_vocabulary.h"
#include "tokenizer/tokenizer_fixture.h"

namespace llama {
namespace {

using ::testing::HasSubstr;

ModelConfig ConfigFor(const Tokenizer& tokenizer) {
  return ModelShape(/*dim=*/64, /*n_layers=*/2, /*n_heads=*/4, /*n_kv_heads=*/2, tokenizer.vocab_size());
}

TEST(GgufTensorNameTest, MapsOurNamesToLlamaCpps) {
  EXPECT_EQ(*GgufTensorName("tok_embeddings.weight"), "token_embd.weight");
  EXPECT_EQ(*GgufTensorName("norm.weight"), "output_norm.weight");
  EXPECT_EQ(*GgufTensorName("layers.11.attention.wq.weight"), "blk.11.attn_q.weight");
  EXPECT_EQ(*GgufTensorName("layers.0.feed_forward.w2.weight"), "blk.0.ffn_down.weight");
}

TEST(GgufTensorNameTest, RefusesNamesItDoesNotKnow) {
  for (const char* name : {"layers.x.attention.wq.weight", "layers.3.attention.wz.weight", "rope.freqs"}) {
    absl::StatusOr<std::string> gguf = GgufTensorName(name);
    ASSERT_FALSE(gguf.ok()) << name;
    EXPECT_THAT(gguf.status().message(), HasSubstr(absl::StrCat("no GGUF name for tensor \"", name, "\"")));
  }
}

TEST(LlamaGgufMetadataTest, RefusesAVocabularyOfAnotherSize) {
  const Tokenizer& tokenizer = testing::FixtureTokenizer();
  ModelConfig config = ConfigFor(tokenizer);
  config.vocab_size += 1;
  absl::StatusOr<GgufMetadata> m = LlamaGgufMetadata(config, tokenizer, "tiny", DType::kBF16);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("but the model's vocabulary is"));
}

TEST(LlamaGgufMetadataTest, RefusesWeightTypesLlamaCppHasNoFileTypeFor) {
  const Tokenizer& tokenizer = testing::FixtureTokenizer();
  for (DType weights : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0}) {
    EXPECT_TRUE(LlamaGgufMetadata(ConfigFor(tokenizer), tokenizer, "tiny", weights).ok()) << DTypeName(weights);
  }
  absl::StatusOr<GgufMetadata> m = LlamaGgufMetadata(ConfigFor(tokenizer), tokenizer, "tiny", DType::kF64);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("GGUF weights must be f32, f16, bf16, q8_0, q4_k or q6_k, not f64"));
}

// `metadata` in a GGUF file (with one tensor, as files have), read back.
std::vector<std::pair<std::string, nlohmann::json>> WrittenAndReadBack(const std::string& name,
                                                                       const GgufMetadata& metadata) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/" + name + ".gguf";
  absl::StatusOr<std::unique_ptr<GgufWriter>> writer =
      GgufWriter::Create(path, metadata, {{"token_embd.weight", DType::kF32, {1, 8}}});
  EXPECT_TRUE(writer.ok()) << writer.status();
  if (!writer.ok()) return {};
  EXPECT_TRUE((*writer)->Append(std::vector<uint8_t>(8 * sizeof(float))).ok());
  EXPECT_TRUE((*writer)->Finish().ok());
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.status();
  return file.ok() ? (*file)->metadata() : std::vector<std::pair<std::string, nlohmann::json>>();
}

// Texts that exercise both tokenizers: whitespace runs, digits, multi-byte
// and combining characters, special tokens' text, invalid UTF-8.
std::vector<std::string> RoundTripTexts() {
  std::vector<std::string> texts = {
      "",           " ",  "   Hello  world  ", "\t\n\n  \n", "1234567890 3.14159 6.022e23",
      "I'm you're they'LL", "\xE6\x9D\xB1\xE4\xBA\xAC \xEC\x84\x9C\xEC\x9A\xB8 \xF0\x9F\xA6\x99",
      "e\xCC\x81 a\xCC\x88", "<s>[INST] hi [/INST]</s>", "<|begin_of_text|><|start_header_id|>user<|eot_id|>",
      "\xFF\xFE invalid \xC3\x28", "def f(x):\n    return x**2  # comment\n",
  };
  for (const nlohmann::json& row : testing::ReadGolden("encode_golden.json")) {
    texts.push_back(testing::DecodeBase64Field(row, "text_b64"));
  }
  return texts;
}

// Export (LlamaGgufMetadata), a GGUF file, import (TokenizerModelFromGguf):
// the same tokenizer, id for id.
void ExpectRoundTrip(const Tokenizer& original, const std::string& name) {
  absl::StatusOr<GgufMetadata> m = LlamaGgufMetadata(ConfigFor(original), original, name, DType::kF32);
  ASSERT_TRUE(m.ok()) << m.status();
  const std::vector<std::pair<std::string, nlohmann::json>> metadata = WrittenAndReadBack(name, *m);
  absl::StatusOr<std::string> model = TokenizerModelFromGguf(metadata, name + ".gguf");
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<std::unique_ptr<Tokenizer>> rebuilt = Tokenizer::FromSerialized(*model, name);
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  EXPECT_EQ((*rebuilt)->family(), original.family());
  EXPECT_EQ((*rebuilt)->vocab_size(), original.vocab_size());
  EXPECT_EQ((*rebuilt)->bos_id(), original.bos_id());
  EXPECT_EQ((*rebuilt)->eos_id(), original.eos_id());
  EXPECT_EQ((*rebuilt)->stop_ids(), original.stop_ids());
  for (const std::string& text : RoundTripTexts()) {
    EXPECT_EQ(*(*rebuilt)->Encode(text, true, false), *original.Encode(text, true, false)) << text;
  }
  std::vector<int> every_id(original.vocab_size());
  for (int id = 0; id < original.vocab_size(); ++id) every_id[id] = id;
  EXPECT_EQ(*(*rebuilt)->Decode(every_id), *original.Decode(every_id));
}

TEST(LlamaGgufMetadataTest, SentencePieceVocabularyComesBackFromTheFile) {
  ExpectRoundTrip(testing::FixtureTokenizer(), "sentencepiece");
}

TEST(LlamaGgufMetadataTest, TiktokenVocabularyComesBackFromTheFile) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tiktoken =
      Tokenizer::Load("tests/fixtures/tiktoken_fixture/tokenizer.model");
  ASSERT_TRUE(tiktoken.ok()) << tiktoken.status();
  ExpectRoundTrip(**tiktoken, "tiktoken");
}

// A file llama.cpp's llama-quantize rewrote (checkpoint/testdata/gguf, from
// our export of the SentencePiece fixture): its vocabulary as it wrote it.
TEST(LlamaGgufMetadataTest, VocabularyOfAFileLlamaCppWroteComesBack) {
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open("checkpoint/testdata/gguf/Q4_K_M.gguf");
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<std::string> model = TokenizerModelFromGguf((*file)->metadata(), "Q4_K_M.gguf");
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<std::unique_ptr<Tokenizer>> rebuilt = Tokenizer::FromSerialized(*model, "Q4_K_M.gguf");
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  const Tokenizer& original = testing::FixtureTokenizer();
  ASSERT_EQ((*rebuilt)->vocab_size(), original.vocab_size());
  for (const std::string& text : RoundTripTexts()) {
    EXPECT_EQ(*(*rebuilt)->Encode(text, true, false), *original.Encode(text, true, false)) << text;
  }
}

// What llama.cpp reads besides the vocabulary: the chat template, by family
// (and one we recognise), and the quantization version of the ggml blocks.
TEST(LlamaGgufMetadataTest, WritesTheFamilysChatTemplateAndTheQuantizationVersion) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tiktoken =
      Tokenizer::Load("tests/fixtures/tiktoken_fixture/tokenizer.model");
  ASSERT_TRUE(tiktoken.ok()) << tiktoken.status();
  const std::pair<const Tokenizer*, ChatTemplateKind> cases[] = {
      {&testing::FixtureTokenizer(), ChatTemplateKind::kLlama2}, {tiktoken->get(), ChatTemplateKind::kLlama3}};
  for (const auto& [tokenizer, kind] : cases) {
    absl::StatusOr<GgufMetadata> m = LlamaGgufMetadata(ConfigFor(*tokenizer), *tokenizer, "tiny", DType::kQ8_0);
    ASSERT_TRUE(m.ok()) << m.status();
    std::map<std::string, nlohmann::json> keys;
    for (const auto& [key, value] : WrittenAndReadBack("template", *m)) keys[key] = value;
    EXPECT_EQ(keys["general.quantization_version"], 2);
    ASSERT_TRUE(keys["tokenizer.chat_template"].is_string());
    const std::string jinja = keys["tokenizer.chat_template"].get<std::string>();
    EXPECT_EQ(jinja, StandardChatTemplate(kind));
    absl::StatusOr<ChatTemplateKind> recognised = RecognizeChatTemplate(jinja, "tiny.gguf");
    ASSERT_TRUE(recognised.ok()) << recognised.status();
    EXPECT_EQ(*recognised, kind);
  }
}

}  // namespace
}  // namespace llama
