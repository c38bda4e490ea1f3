#include "tokenizer/sentencepiece_proto.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "tokenizer/tokenizer.h"

namespace llama {
namespace {

// Specials named otherwise than SentencePiece's defaults, at other ids; the
// 256 byte pieces; "▁", "a" and "▁a".
SentencePieceSpec Spec() {
  SentencePieceSpec spec;
  spec.pieces = {{"<s>", 0, SentencePieceType::kControl},
                 {"</s>", 0, SentencePieceType::kControl},
                 {"[UNK]", 0, SentencePieceType::kUnknown}};
  for (int b = 0; b < 256; ++b) spec.pieces.push_back({absl::StrFormat("<0x%02X>", b), 0, SentencePieceType::kByte});
  spec.pieces.push_back({"\xE2\x96\x81", -2, SentencePieceType::kNormal});
  spec.pieces.push_back({"a", -3, SentencePieceType::kNormal});
  spec.pieces.push_back({"\xE2\x96\x81" "a", -1, SentencePieceType::kNormal});
  spec.bos_id = 0;
  spec.eos_id = 1;
  spec.unk_id = 2;
  return spec;
}

std::unique_ptr<Tokenizer> Parsed(const SentencePieceSpec& spec) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      Tokenizer::FromSerialized(SerializeSentencePieceModel(spec), "spec");
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
}

TEST(SentencePieceProtoTest, SentencePieceReadsPiecesSpecialsAndSettings) {
  const std::unique_ptr<Tokenizer> tokenizer = Parsed(Spec());
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->vocab_size(), 262);
  EXPECT_EQ(tokenizer->bos_id(), 0);
  EXPECT_EQ(tokenizer->eos_id(), 1);
  EXPECT_EQ(tokenizer->unk_id(), 2);
  EXPECT_EQ(tokenizer->pad_id(), -1);
  EXPECT_EQ(tokenizer->GetPiece(259).score, -2.0f);
  EXPECT_EQ(tokenizer->GetPiece(3 + 'z').kind, Tokenizer::PieceKind::kByte);
  // Byte fallback for "z"; whitespace runs kept; the dummy prefix.
  EXPECT_EQ(*tokenizer->Encode("a  z", true, true), (std::vector<int>{0, 261, 259, 259, 3 + 'z', 1}));
}

TEST(SentencePieceProtoTest, NormalizerSettingsAndByteFallbackAreWritten) {
  SentencePieceSpec spec = Spec();
  spec.remove_extra_whitespaces = true;
  spec.add_dummy_prefix = false;
  const std::unique_ptr<Tokenizer> tokenizer = Parsed(spec);
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(*tokenizer->Encode("  a   a z ", false, false), (std::vector<int>{260, 261, 259, 3 + 'z'}));
  // SentencePiece refuses byte pieces in a model without byte fallback: the flag is read.
  spec.byte_fallback = false;
  EXPECT_THAT(Tokenizer::FromSerialized(SerializeSentencePieceModel(spec), "spec").status().message(),
              ::testing::HasSubstr("byte piece <0x00> is found although `byte_fallback` is false"));
}

}  // namespace
}  // namespace llama
