#include "worker/grammar/regex_to_gbnf.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "worker/grammar/grammar.h"

namespace llama::grammar {
namespace {

using ::testing::HasSubstr;

std::shared_ptr<const Grammar> Parse(const std::string& gbnf) {
  absl::StatusOr<std::shared_ptr<const Grammar>> g = Grammar::Parse(gbnf);
  EXPECT_TRUE(g.ok()) << g.status() << "\n" << gbnf;
  return g.ok() ? *g : nullptr;
}

std::shared_ptr<const Grammar> FromRegex(absl::string_view regex) {
  absl::StatusOr<std::string> gbnf = RegexToGbnf(regex);
  EXPECT_TRUE(gbnf.ok()) << gbnf.status();
  return Parse(gbnf.ok() ? *gbnf : "");
}

std::string ErrorOf(absl::string_view regex) {
  absl::StatusOr<std::string> gbnf = RegexToGbnf(regex);
  EXPECT_FALSE(gbnf.ok()) << regex << " gave " << *gbnf;
  EXPECT_EQ(gbnf.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(gbnf.status().message());
}

TEST(RegexToGbnfTest, LiteralsAndEscapes) {
  auto g = FromRegex("a\\.b\\\\\\n\\t\\x41\\u00e9\xF0\x9F\x98\x80\\/\"\\*");
  EXPECT_TRUE(g->Accepts("a.b\\\n\tA\xC3\xA9\xF0\x9F\x98\x80/\"*"));
  EXPECT_FALSE(g->Accepts("axb\\\n\tA\xC3\xA9\xF0\x9F\x98\x80/\"*"));
  auto control = FromRegex(R"(\x0a\0\f\v)");
  EXPECT_TRUE(control->Accepts(std::string("\n\0\f\v", 4)));
}

// What ECMAScript and Python's re read differently, or one of them lacks,
// is refused: a pattern means what both say.
TEST(RegexToGbnfTest, ConstructsTheReadersDisagreeOnAreRefused) {
  for (const char* regex : {"a{,3}", "a{,}", "[^]a]", "[]a]", "\\cJ", "\\u{1F600}", "(?<n>a)", "(?P<n>a)", "{1}",
                            "a|{2,3}", "[\\w-a]", "[\\d-x]"}) {
    EXPECT_THAT(ErrorOf(regex), HasSubstr("is not supported")) << regex;
  }
  EXPECT_THAT(ErrorOf("a{,3}"), HasSubstr("Python's re as a count"));
  auto literal_brace = FromRegex("a{x}");  // Text in both.
  EXPECT_TRUE(literal_brace->Accepts("a{x}"));
}

TEST(RegexToGbnfTest, DotIsAnyCharacterButALineTerminator) {
  auto g = FromRegex("a.c");
  EXPECT_TRUE(g->Accepts("abc"));
  EXPECT_TRUE(
      g->Accepts("a\xE2\x82\xAC"
                 "c"));
  EXPECT_FALSE(g->Accepts("a\nc"));
  EXPECT_FALSE(
      g->Accepts("a\xE2\x80\xA8"
                 "c"));  // U+2028
  EXPECT_FALSE(g->Accepts("ac"));
}

TEST(RegexToGbnfTest, ClassesAndShorthands) {
  auto g = FromRegex(R"([a-c_]+[^abc\d][\w-]\s\D\W\S[\]\\.^-])");
  EXPECT_TRUE(g->Accepts("ab_x-\tx!y]"));
  EXPECT_TRUE(g->Accepts("cZ9 ..^-"));
  EXPECT_FALSE(g->Accepts("ab5x-\tx!y]"));  // [^abc\d]
  EXPECT_FALSE(g->Accepts("abx!\tx!y]"));   // [\w-]
  EXPECT_FALSE(g->Accepts("abx-\t1!y]"));   // \D
  EXPECT_FALSE(g->Accepts("abx-\txay]"));   // \W
  auto digits = FromRegex(R"(\d{3}-[0-9A-Fa-f]{2})");
  EXPECT_TRUE(digits->Accepts("123-aF"));
  EXPECT_FALSE(digits->Accepts("12-aF"));
  EXPECT_FALSE(digits->Accepts("123-aG"));
}

// Only what ECMAScript and Python's re both match: U+001C is \s to Python
// only, U+FEFF to ECMAScript only, and letters past ASCII are \w to Python.
TEST(RegexToGbnfTest, ShorthandsTakeWhatBothFlavoursMatch) {
  auto s = FromRegex(R"(\s)");
  EXPECT_TRUE(s->Accepts(" "));
  EXPECT_TRUE(s->Accepts("\xE3\x80\x80"));   // U+3000
  EXPECT_FALSE(s->Accepts("\xEF\xBB\xBF"));  // U+FEFF
  EXPECT_FALSE(s->Accepts("\x1C"));
  for (const char* regex : {R"(\S)", R"([^\s])"}) {
    auto not_s = FromRegex(regex);
    EXPECT_TRUE(not_s->Accepts("x")) << regex;
    EXPECT_FALSE(not_s->Accepts("\x1C")) << regex;
    EXPECT_FALSE(not_s->Accepts("\xEF\xBB\xBF")) << regex;
  }
  auto not_w = FromRegex(R"(\W)");
  EXPECT_TRUE(not_w->Accepts("!"));
  EXPECT_FALSE(not_w->Accepts("\xC3\xA9"));
  auto not_d = FromRegex(R"([^\d]\D)");
  EXPECT_TRUE(not_d->Accepts("x\xC3\xA9"));
  EXPECT_FALSE(not_d->Accepts("\xD9\xA3x"));  // U+0663, an Arabic-Indic digit.
  EXPECT_FALSE(not_d->Accepts("x\xD9\xA3"));
}

TEST(RegexToGbnfTest, GroupsAlternationAndQuantifiers) {
  auto g = FromRegex("^(ab|cd)+(?:x|y)?z{2}w{2,}v{1,3}?(q)*$");
  EXPECT_TRUE(g->Accepts("abzzwwv"));
  EXPECT_TRUE(g->Accepts("cdabyzzwwwwvvvqq"));
  EXPECT_FALSE(g->Accepts("zzwwv"));       // (ab|cd)+ needs one.
  EXPECT_FALSE(g->Accepts("abxyzzwwv"));   // (?:x|y)? at most one.
  EXPECT_FALSE(g->Accepts("abzzzwwv"));    // z{2}
  EXPECT_FALSE(g->Accepts("abzzwv"));      // w{2,}
  EXPECT_FALSE(g->Accepts("abzzwwvvvv"));  // v{1,3}
  auto empty_branch = FromRegex("a(|b)c|");
  EXPECT_TRUE(empty_branch->Accepts("ac"));
  EXPECT_TRUE(empty_branch->Accepts("abc"));
  EXPECT_TRUE(empty_branch->Accepts(""));
  auto brace = FromRegex("a{b");  // Not a count: a literal brace.
  EXPECT_TRUE(brace->Accepts("a{b"));
}

TEST(RegexToGbnfTest, RefusesWhatAGrammarCannotSay) {
  EXPECT_THAT(ErrorOf(R"((a)\1)"), HasSubstr("backreference \\1"));
  EXPECT_THAT(ErrorOf(R"((a)\k<x>)"), HasSubstr("backreference \\k"));
  EXPECT_THAT(ErrorOf("a(?=b)"), HasSubstr("lookahead"));
  EXPECT_THAT(ErrorOf("a(?!b)"), HasSubstr("lookahead"));
  EXPECT_THAT(ErrorOf("(?<=a)b"), HasSubstr("lookbehind"));
  EXPECT_THAT(ErrorOf("(?<!a)b"), HasSubstr("lookbehind"));
  EXPECT_THAT(ErrorOf(R"(a\bc)"), HasSubstr("word boundary \\b"));
  EXPECT_THAT(ErrorOf(R"(a\Bc)"), HasSubstr("\\B"));
  EXPECT_THAT(ErrorOf("a^b"), HasSubstr("anchor ^"));
  EXPECT_THAT(ErrorOf("a$b"), HasSubstr("anchor $"));
  EXPECT_THAT(ErrorOf(R"(\p{L})"), HasSubstr("Unicode property"));
  EXPECT_THAT(ErrorOf("(a*)*"), HasSubstr("can match nothing"));
  EXPECT_THAT(ErrorOf("a{3,2}"), HasSubstr("n < m"));
  EXPECT_THAT(ErrorOf("a**"), HasSubstr("nothing to repeat"));
  EXPECT_THAT(ErrorOf("(ab"), HasSubstr("missing ')'"));
  EXPECT_THAT(ErrorOf("ab)"), HasSubstr("unmatched ')'"));
  EXPECT_THAT(ErrorOf("[ab"), HasSubstr("unterminated"));
  EXPECT_THAT(ErrorOf(R"(\q)"), HasSubstr("unknown escape \\q"));
  EXPECT_THAT(ErrorOf("a{5000}"), HasSubstr("count over 1000"));
}

TEST(RegexToGbnfTest, LengthsOfTheMatches) {
  using internal_grammar::RegexTarget;
  auto lengths = [](absl::string_view regex) {
    absl::StatusOr<internal_grammar::RegexExpression> e =
        internal_grammar::RegexToGbnfExpression(regex, RegexTarget::kText);
    EXPECT_TRUE(e.ok()) << e.status();
    return std::make_pair(e->min_length, e->max_length);
  };
  EXPECT_EQ(lengths("ab(c|de){2,3}"), std::make_pair(int64_t{4}, int64_t{8}));
  EXPECT_EQ(lengths("a+"), std::make_pair(int64_t{1}, kNoLimit));
  EXPECT_EQ(lengths("(ab)?c{0}"), std::make_pair(int64_t{0}, int64_t{2}));
}

// Inside a JSON string, what the regex matches is written with JSON's escapes.
TEST(RegexToGbnfTest, JsonStringTargetEscapes) {
  absl::StatusOr<internal_grammar::RegexExpression> e =
      internal_grammar::RegexToGbnfExpression(R"(a"\\[\n\t]x[^a]?)", internal_grammar::RegexTarget::kJsonString);
  ASSERT_TRUE(e.ok()) << e.status();
  auto g = Parse(absl::StrCat(R"(root ::= "\"" )", e->gbnf, R"( "\"")"));
  EXPECT_TRUE(g->Accepts(R"("a\"\\\nx")"));
  EXPECT_TRUE(g->Accepts(R"("a\"\\\tx\u0001")"));
  EXPECT_TRUE(g->Accepts(R"("a\"\\\tx\"")"));
  EXPECT_TRUE(g->Accepts(R"("a\"\\\txb")"));
  EXPECT_FALSE(g->Accepts("\"a\\\"\\\\\nx\""));  // A raw newline.
  EXPECT_FALSE(g->Accepts(R"("a"\\\nx")"));      // An unescaped quote.
  EXPECT_FALSE(g->Accepts(R"("a\"\\\nxa")"));
}

TEST(ChoiceGbnfTest, ExactlyOneOfTheChoices) {
  auto g = Parse(ChoiceGbnf({"yes", "no", "say \"maybe\"\n", "d\xC3\xA9j\xC3\xA0"}));
  EXPECT_TRUE(g->Accepts("yes"));
  EXPECT_TRUE(g->Accepts("no"));
  EXPECT_TRUE(g->Accepts("say \"maybe\"\n"));
  EXPECT_TRUE(g->Accepts("d\xC3\xA9j\xC3\xA0"));
  EXPECT_FALSE(g->Accepts("yesno"));
  EXPECT_FALSE(g->Accepts("ye"));
  EXPECT_FALSE(g->Accepts(""));
}

}  // namespace
}  // namespace llama::grammar
