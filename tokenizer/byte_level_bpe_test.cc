#include "tokenizer/byte_level_bpe.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tokenizer/tiktoken_model.h"

namespace llama {
namespace {

using ::testing::HasSubstr;

TEST(ByteLevelBpeTest, EveryByteHasOneCharacterAndComesBack) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  EXPECT_EQ(*ByteLevelBytes(ByteLevelText(all), "x"), all);
  // GPT-2's familiar ones: space is U+0120 (Ġ), newline U+010A (Ċ); letters stand for themselves.
  EXPECT_EQ(ByteLevelText(" the\n"), "\xC4\xA0the\xC4\x8A");
  EXPECT_EQ(ByteLevelText("\xC3\xA9"), "\xC3\x83\xC2\xA9");
}

TEST(ByteLevelBpeTest, CharactersOutsideTheMappingAreAnError) {
  EXPECT_THAT(ByteLevelBytes("ab\xE2\x96\x81", "f.json: model.vocab").status().message(),
              HasSubstr("f.json: model.vocab: \"ab\\xe2\\x96\\x81\" has U+2581 at byte 2, which is not one of "
                        "GPT-2's 256 byte-level characters"));
  EXPECT_THAT(ByteLevelBytes(" ", "k").status().message(), HasSubstr("has U+0020 at byte 0"));
  EXPECT_THAT(ByteLevelBytes("\xFF", "k").status().message(), HasSubstr("has invalid UTF-8 at byte 0"));
}

ByteLevelVocabulary SmallVocabulary() {
  ByteLevelVocabulary v;
  for (int b = 0; b < 256; ++b) v.tokens.push_back(ByteLevelText(std::string(1, static_cast<char>(b))));
  v.tokens.push_back("ab");
  v.tokens.push_back("abc");
  v.merges = {{"a", "b"}, {"ab", "c"}};
  v.specials = internal_tokenizer::Llama3SpecialTokens();
  v.tokens_key = "tokens";
  v.merges_key = "merges";
  v.specials_key = "specials";
  return v;
}

TEST(ByteLevelBpeTest, RanksFileHasTheBytesOfEachIdInOrder) {
  absl::StatusOr<std::string> ranks = TiktokenRanksFile(SmallVocabulary(), "f");
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  EXPECT_THAT(*ranks, HasSubstr("\nIA== 32\n"));  // " ", from Ġ.
  EXPECT_THAT(*ranks, HasSubstr("\nYWI= 256\nYWJj 257\n"));
}

TEST(ByteLevelBpeTest, RefusesWhatTiktokenWouldMergeOtherwise) {
  ByteLevelVocabulary v = SmallVocabulary();
  std::swap(v.merges[0], v.merges[1]);
  EXPECT_THAT(TiktokenRanksFile(v, "f").status().message(),
              HasSubstr("f: merges[1] makes token 256 after an earlier merge made token 257"));
  v = SmallVocabulary();
  v.tokens[257] = "ab";
  EXPECT_THAT(TiktokenRanksFile(v, "f").status().message(), HasSubstr("f: tokens[257] \"ab\" repeats token 256"));
  v = SmallVocabulary();
  v.specials[9] = "<|im_end|>";
  EXPECT_THAT(TiktokenRanksFile(v, "f").status().message(),
              HasSubstr("f: specials: token 267 is \"<|im_end|>\"; expected \"<|eot_id|>\""));
}

}  // namespace
}  // namespace llama
