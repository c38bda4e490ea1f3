#include "worker/serve/text_output.h"

#include <gtest/gtest.h>

#include "tokenizer/tokenizer_fixture.h"
#include "tokenizer/utf8.h"

namespace llama {
namespace {

// Streams `text`'s token ids through a TextOutput; checks that everything
// sent so far is always a prefix of `expected` (so no part of a stop string
// ever went out) and that every piece is whole UTF-8; returns the pieces.
std::vector<std::string> Stream(const std::string& text, const std::vector<std::string>& stops,
                                const std::string& expected, bool expect_stop) {
  const Tokenizer& tokenizer = testing::FixtureTokenizer();
  absl::StatusOr<std::vector<int>> ids = tokenizer.Encode(text, /*bos=*/false, /*eos=*/false);
  EXPECT_TRUE(ids.ok()) << ids.status();
  TextOutput output(tokenizer, stops);
  std::vector<std::string> pieces;
  std::string sent;
  for (int id : *ids) {
    absl::StatusOr<std::string> piece = output.Push(id);
    EXPECT_TRUE(piece.ok()) << piece.status();
    pieces.push_back(*piece);
    sent += *piece;
    EXPECT_EQ(expected.compare(0, sent.size(), sent), 0) << "sent \"" << sent << "\" of \"" << expected << "\"";
    EXPECT_EQ(SanitizeUtf8(*piece), *piece) << "a piece splits a character";
  }
  absl::StatusOr<std::string> rest = output.Finish();
  EXPECT_TRUE(rest.ok());
  sent += *rest;
  EXPECT_EQ(sent, expected);
  EXPECT_EQ(output.stopped(), expect_stop);
  return pieces;
}

TEST(TextOutputTest, WithoutStopsEverythingIsSentAsItComes) {
  const std::string text = "Hello world, the meaning of life";
  Stream(text, {}, text, false);
}

TEST(TextOutputTest, StopStringIsCutAndNeverSentEvenInPart) {
  Stream("The answer is 42.\nQuestion: next", {"\nQuestion:"}, "The answer is 42.", true);
  // The earliest of several stops wins; one never completed is sent at the end.
  Stream("alpha beta gamma", {"gamma", "beta"}, "alpha ", true);
  Stream("alpha beta gam", {"gamma"}, "alpha beta gam", false);
}

TEST(TextOutputTest, TextThatMightStartAStopIsHeldBackUntilItCannot) {
  const std::vector<std::string> pieces = Stream("ab abc abd", {"abx"}, "ab abc abd", false);
  // Nothing ending in "a" or "ab" went out before the token after it.
  std::string sent;
  for (const std::string& p : pieces) {
    sent += p;
    EXPECT_FALSE(!sent.empty() && (sent.back() == 'a' || (sent.size() > 1 && sent.substr(sent.size() - 2) == "ab")))
        << sent;
  }
}

TEST(TextOutputTest, MultiByteCharactersAndStopsAcrossThem) {
  // The fixture tokenizer has no piece for these: each is several byte
  // tokens, so a character does span tokens here.
  for (const char* c : {"\xE6\xBC\xA2", "\xE2\x82\xAC"}) {  // 漢, €
    EXPECT_GT(testing::FixtureTokenizer().Encode(c, false, false)->size(), 1u) << c;
  }
  Stream("caf\xC3\xA9 \xE6\xBC\xA2\xE5\xAD\x97 \xE2\x82\xAC" "5 end", {},
         "caf\xC3\xA9 \xE6\xBC\xA2\xE5\xAD\x97 \xE2\x82\xAC" "5 end", false);
  // A stop string that starts inside a run of byte tokens.
  Stream("x \xE6\xBC\xA2\xE5\xAD\x97\xE2\x82\xAC y", {"\xE5\xAD\x97\xE2\x82\xAC"}, "x \xE6\xBC\xA2", true);
}

}  // namespace
}  // namespace llama
