#include "worker/grammar/grammar.h"

#include <chrono>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace llama::grammar {
namespace {

using ::testing::HasSubstr;

std::shared_ptr<const Grammar> Compile(absl::string_view gbnf) {
  absl::StatusOr<std::shared_ptr<const Grammar>> g = Grammar::Parse(gbnf);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *g : nullptr;
}

std::string ErrorOf(absl::string_view gbnf) {
  absl::StatusOr<std::shared_ptr<const Grammar>> g = Grammar::Parse(gbnf);
  EXPECT_FALSE(g.ok()) << gbnf;
  return std::string(g.status().message());
}

TEST(GrammarTest, LiteralsAlternativesAndReferences) {
  auto g = Compile(R"(root ::= greeting " " name
greeting ::= "hello" | "hi"
name ::= "world" | "there"  # a comment
)");
  EXPECT_TRUE(g->Accepts("hello world"));
  EXPECT_TRUE(g->Accepts("hi there"));
  EXPECT_FALSE(g->Accepts("hello"));
  EXPECT_FALSE(g->Accepts("hello world!"));
  EXPECT_FALSE(g->Accepts(""));
}

TEST(GrammarTest, ClassesMatchCodePointsAsUtf8) {
  auto g = Compile(R"(root ::= [a-zé] [^"\\] .)");
  EXPECT_TRUE(g->Accepts("aZ\xF0\x9F\x98\x80"));
  EXPECT_TRUE(g->Accepts("\xC3\xA9\xC3\xA9x"));
  EXPECT_FALSE(g->Accepts("a\"x"));
  EXPECT_FALSE(g->Accepts("a\\x"));
  EXPECT_FALSE(g->Accepts("Ax!"));
  EXPECT_FALSE(g->Accepts("a\xC3x"));  // A lone lead byte is not a character.
}

TEST(GrammarTest, EscapesInLiteralsAndClasses) {
  auto g = Compile(R"(root ::= "\x41\u00e9\n\"" [\]\-\t])");
  EXPECT_TRUE(g->Accepts("A\xC3\xA9\n\"]"));
  EXPECT_TRUE(g->Accepts("A\xC3\xA9\n\"-"));
  EXPECT_TRUE(g->Accepts("A\xC3\xA9\n\"\t"));
  EXPECT_FALSE(g->Accepts("A\xC3\xA9\n\"x"));
}

TEST(GrammarTest, Repetitions) {
  auto g = Compile(R"(root ::= "a"* "b"+ "c"? ("d" | "e"){2,3} "f"{2,} "g"{0,2} "h"{1})");
  EXPECT_TRUE(g->Accepts("bdeffh"));
  EXPECT_TRUE(g->Accepts("aaabbcdedfffggh"));
  EXPECT_FALSE(g->Accepts("dffh"));       // b+ needs one.
  EXPECT_FALSE(g->Accepts("bdffh"));      // {2,3} needs two.
  EXPECT_FALSE(g->Accepts("bdddeffh"));   // ... at most three.
  EXPECT_FALSE(g->Accepts("bddfh"));      // f{2,}
  EXPECT_FALSE(g->Accepts("bddffgggh"));  // g{0,2}
}

TEST(GrammarTest, GroupsSpanLinesAndRulesContinueAfterBars) {
  auto g = Compile("root ::= (\n  \"x\" |\n  \"y\"\n) z\nz ::= \"1\" |\n  \"2\"\n");
  EXPECT_TRUE(g->Accepts("x1"));
  EXPECT_TRUE(g->Accepts("y2"));
  EXPECT_FALSE(g->Accepts("z"));
}

TEST(GrammarTest, RecursionNestsAndLongRepetitionsStayShallow) {
  auto g = Compile(R"(root ::= value
value ::= "[" (value ("," value)*)? "]" | "0"
)");
  EXPECT_TRUE(g->Accepts("[[0,[0]],[],0]"));
  EXPECT_FALSE(g->Accepts("[[0,[0]],[],0"));
  EXPECT_FALSE(g->Accepts("[0,]"));
  auto digits = Compile(R"(root ::= [0-9]*)");
  EXPECT_TRUE(digits->Accepts(std::string(100000, '7')));
}

TEST(GrammarTest, EmptyAlternativesAndEmptyLiterals) {
  auto g = Compile(R"(root ::= "a" opt ""
opt ::= | "b"
)");
  EXPECT_TRUE(g->Accepts("a"));
  EXPECT_TRUE(g->Accepts("ab"));
  EXPECT_FALSE(g->Accepts("abb"));
}

TEST(GrammarTest, RulesOfTheTextNeverMeetGeneratedOnes) {
  auto g = Compile("root-2 ::= \"b\"\nroot ::= root-2 (\"a\" | \"c\") root-1\nroot-1 ::= \"d\"*\n");
  EXPECT_TRUE(g->Accepts("ba"));
  EXPECT_TRUE(g->Accepts("bcdd"));
  EXPECT_FALSE(g->Accepts("aa"));
}

// Grammars are the client's (guided_grammar, guided_regex, patterns): what
// would take exponential time or a deep C++ stack is bounded.
TEST(GrammarTest, HostileGrammarsStayCheap) {
  const auto start = std::chrono::steady_clock::now();
  // Empty alternatives repeated: 2^60 paths without the closure's dedup.
  EXPECT_TRUE(Compile(R"(root ::= "x" ("" | ""){60})")->Accepts("x"));
  EXPECT_TRUE(Compile("root ::= e{24}\ne ::= \"\" | \"\"\n")->Accepts(""));
  // Many equal parses: the true one is not lost to a count of duplicates.
  auto ambiguous = Compile(R"(root ::= (("a"? | "b"?){24} "c") | "d")");
  EXPECT_TRUE(ambiguous->Accepts("d"));
  EXPECT_TRUE(ambiguous->Accepts("abc"));
  // A chain of 100k rules, each calling the next before a byte: deep
  // frames, no deep recursion.
  std::string chain;
  const int n = 100000;
  for (int i = 0; i < n; ++i) absl::StrAppend(&chain, i == 0 ? "root" : absl::StrCat("r", i), " ::= r", i + 1, " \"x\"\n");
  absl::StrAppend(&chain, "r", n, " ::= \"x\"\n");
  EXPECT_TRUE(Compile(chain)->Accepts(std::string(n + 1, 'x')));
  // Rules nullable only through a long chain, in the worst order.
  std::string nullable;
  for (int i = 0; i < 30000; ++i) absl::StrAppend(&nullable, i == 0 ? "root" : absl::StrCat("n", i), " ::= n", i + 1, "\n");
  absl::StrAppend(&nullable, "n30000 ::= \"\"\n");
  EXPECT_TRUE(Compile(nullable)->Accepts(""));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_THAT(ErrorOf("root ::= " + std::string(20000, '(') + "\"a\"" + std::string(20000, ')')),
              HasSubstr("groups nested deeper than 100"));
}

TEST(GrammarTest, ErrorsSayWhereAndWhat) {
  EXPECT_THAT(ErrorOf("root ::= \"abc"), HasSubstr("line 1, column 14: unterminated string literal"));
  EXPECT_THAT(ErrorOf("root ::= x\n"), HasSubstr("rule 'x' is used but never defined"));
  EXPECT_THAT(ErrorOf("x ::= \"a\"\n"), HasSubstr("no rule named 'root'"));
  EXPECT_THAT(ErrorOf("root ::= \"a\"\nroot ::= \"b\"\n"), HasSubstr("line 2, column 5: rule 'root' is defined twice"));
  EXPECT_THAT(ErrorOf("root ::= root \"a\" | \"b\"\n"), HasSubstr("rule 'root' is left-recursive"));
  EXPECT_THAT(ErrorOf("root ::= a\na ::= b? a \"x\"\nb ::= \"y\"\n"), HasSubstr("left-recursive"));
  EXPECT_THAT(ErrorOf("root ::= (\"\")*\n"), HasSubstr("repeats what can be empty"));
  EXPECT_THAT(ErrorOf("root ::= [z-a]"), HasSubstr("reversed"));
  EXPECT_THAT(ErrorOf("root ::= \"a\"{3,2}"), HasSubstr("maximum is below the minimum"));
  EXPECT_THAT(ErrorOf("root ::= *"), HasSubstr("'*' has nothing to repeat"));
  EXPECT_THAT(ErrorOf("root ::= \"\\q\""), HasSubstr("unknown escape '\\q'"));
  EXPECT_THAT(ErrorOf("root ::= \"a\" ) "), HasSubstr("unexpected ')'"));
  EXPECT_THAT(ErrorOf("root ::= ( \"a\" "), HasSubstr("expected ')'"));
  EXPECT_THAT(ErrorOf("root ::= \"a\" x ::= \"b\""), HasSubstr("put each rule on its own line"));
  EXPECT_THAT(ErrorOf("root ::= \"a\"{100000}"), HasSubstr("repetition counts above"));
}

}  // namespace
}  // namespace llama::grammar
