#include "worker/grammar/gbnf_writer.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "worker/grammar/grammar.h"

namespace llama::grammar {
namespace {

TEST(GbnfWriterTest, LiteralsEscapeWhatWouldEndOrChangeThem) {
  EXPECT_EQ(GbnfLiteral("a\"b\\c\n\t\r"), R"("a\"b\\c\n\t\r")");
  EXPECT_EQ(GbnfLiteral(std::string("\x01\x7F", 2)), R"("\x01\x7F")");
  EXPECT_EQ(GbnfLiteral("\xC3\xA9\xF0\x9F\x98\x80"), R"("\u00E9\U0001F600")");
  EXPECT_EQ(GbnfLiteral("\xFF"), R"("\uFFFD")");
  EXPECT_EQ(GbnfClass({{'a', 'c'}, {'-', '-'}, {']', '^'}}), R"([a-c\-\]-\^])");
  EXPECT_EQ(GbnfClass({{'x', 'x'}}), R"("x")");
}

TEST(GbnfWriterTest, RepeatParenthesizesAllButOneItem) {
  EXPECT_EQ(GbnfRepeat("name-1", 0, 1), "name-1?");
  EXPECT_EQ(GbnfRepeat(R"("a\" b")", 0, kNoLimit), R"("a\" b"*)");
  EXPECT_EQ(GbnfRepeat(R"([\] ])", 1, kNoLimit), R"([\] ]+)");
  EXPECT_EQ(GbnfRepeat("(a | b)", 2, 2), "(a | b){2}");
  EXPECT_EQ(GbnfRepeat(R"("a" "b")", 2, kNoLimit), R"(("a" "b"){2,})");
  EXPECT_EQ(GbnfRepeat("(a) (b)", 1, 3), "((a) (b)){1,3}");
  EXPECT_EQ(GbnfRepeat(R"("(" x)", 1, 1), R"(("(" x))");
  EXPECT_EQ(GbnfRepeat("x", 0, 0), R"("")");
  EXPECT_EQ(GbnfSequence({}), R"("")");
  EXPECT_EQ(GbnfAlternatives({"a", "b c"}), "(a | b c)");
}

// What the writer gives, the parser reads back.
TEST(GbnfWriterTest, ParsesBack) {
  const std::string text = "q\"\\]-^\n\xC3\xA9";
  absl::StatusOr<std::shared_ptr<const Grammar>> g = Grammar::Parse(absl::StrCat(
      "root ::= ", GbnfRepeat(GbnfLiteral(text), 1, 2), " ", GbnfClass({{']', '^'}, {0x10000, 0x10FFFF}}), "\n"));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE((*g)->Accepts(text + text + "^"));
  EXPECT_TRUE((*g)->Accepts(text + "\xF0\x9F\x98\x80"));
  EXPECT_FALSE((*g)->Accepts(text + "_"));
}

}  // namespace
}  // namespace llama::grammar
