#include "tokenizer/token_speller.h"

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tokenizer/tokenizer_fixture.h"
#include "tokenizer/utf8.h"

namespace llama {
namespace {

using ::llama::testing::DecodeBase64Field;
using ::llama::testing::FixtureTokenizer;
using ::llama::testing::ReadGolden;

std::vector<std::string> SpellAll(const Tokenizer& tokenizer, const std::vector<int>& ids) {
  TokenSpeller speller(tokenizer);
  std::vector<std::string> spellings;
  for (int id : ids) {
    spellings.push_back(speller.Spell(id));
    speller.Append(id);
  }
  return spellings;
}

std::string Joined(const std::vector<std::string>& parts) {
  std::string joined;
  for (const std::string& p : parts) joined += p;
  return joined;
}

// The awkward strings of the encode goldens (whitespace runs, characters
// spelled in byte pieces, emoji, combining marks, BOS and EOS around
// them): their tokens' spellings join to the text.
TEST(TokenSpellerTest, SentencePieceSpellingsJoinToTheText) {
  const Tokenizer& tokenizer = FixtureTokenizer();
  int checked = 0;
  for (const nlohmann::json& row : ReadGolden("encode_golden.json")) {
    const std::string text = DecodeBase64Field(row, "text_b64");
    if (SanitizeUtf8(text) != text) continue;  // Invalid UTF-8 does not come back as it went in.
    EXPECT_EQ(Joined(SpellAll(tokenizer, row["ids"].get<std::vector<int>>())), text) << row["ids"].dump();
    ++checked;
  }
  EXPECT_GT(checked, 40);
}

// A token spelled in context is what Decode adds when the token is
// appended: the leading space rule over control and unknown pieces, on
// the decode goldens' random ids (their byte pieces left out: a byte alone
// is no UTF-8 that Decode could return).
TEST(TokenSpellerTest, SpellingIsWhatDecodeAddsAfterTheTokensBefore) {
  const Tokenizer& tokenizer = FixtureTokenizer();
  for (const nlohmann::json& row : ReadGolden("decode_golden.json")) {
    std::vector<int> ids;
    for (int id : row["ids"].get<std::vector<int>>()) {
      if (tokenizer.ByteValue(id) < 0) ids.push_back(id);
    }
    TokenSpeller speller(tokenizer);
    for (size_t i = 0; i < ids.size(); ++i) {
      absl::StatusOr<std::string> before = tokenizer.Decode(absl::MakeConstSpan(ids).first(i));
      absl::StatusOr<std::string> after = tokenizer.Decode(absl::MakeConstSpan(ids).first(i + 1));
      ASSERT_TRUE(before.ok() && after.ok());
      ASSERT_EQ(after->substr(0, before->size()), *before);
      EXPECT_EQ(speller.Spell(ids[i]), after->substr(before->size())) << row["ids"].dump() << " at " << i;
      speller.Append(ids[i]);
    }
  }
}

// Byte pieces are their bytes: a character over three pieces is split
// between them; the leading space goes only from the text's first piece
// (here the dummy prefix's whitespace piece, which spells nothing).
TEST(TokenSpellerTest, ByteAndSpacePieces) {
  const Tokenizer& tokenizer = FixtureTokenizer();
  absl::StatusOr<std::vector<int>> ids = tokenizer.Encode("\xe7\x8c\xab The", /*bos=*/true, /*eos=*/false);
  ASSERT_TRUE(ids.ok());
  const std::vector<std::string> spellings = SpellAll(tokenizer, *ids);
  ASSERT_EQ(spellings.size(), 6u);
  EXPECT_EQ(spellings[0], "");  // BOS.
  EXPECT_EQ(spellings[1], "");  // The dummy prefix's "\u2581".
  EXPECT_EQ(spellings[2], "\xe7");
  EXPECT_EQ(spellings[3], "\x8c");
  EXPECT_EQ(spellings[4], "\xab");
  EXPECT_EQ(spellings[5], " The");
  EXPECT_EQ(Joined(spellings), "\xe7\x8c\xab The");
}

TEST(TokenSpellerTest, TiktokenTokensAreTheirBytes) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      Tokenizer::Load("tests/fixtures/tiktoken_fixture/tokenizer.model");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const std::string text = " The capital of \xe7\x8c\xab is \xf0\x9f\xa6\x99 ";
  absl::StatusOr<std::vector<int>> ids = (*tokenizer)->Encode(text, /*bos=*/false, /*eos=*/false);
  ASSERT_TRUE(ids.ok());
  const std::vector<std::string> spellings = SpellAll(**tokenizer, *ids);
  EXPECT_EQ(Joined(spellings), text);
  for (size_t i = 0; i < ids->size(); ++i) EXPECT_EQ(spellings[i], (*tokenizer)->TokenBytes((*ids)[i]));
  EXPECT_EQ(TokenSpeller(**tokenizer).Spell((*tokenizer)->bos_id()), "<|begin_of_text|>");
}

}  // namespace
}  // namespace llama
