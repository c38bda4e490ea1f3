#include "worker/grammar/token_matcher.h"

#include <fstream>
#include <random>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer_fixture.h"
#include "worker/grammar/json_schema.h"

namespace llama::grammar {
namespace {

constexpr char kJsonish[] = R"(root ::= "{" ws pair ("," ws pair)* ws "}"
pair ::= "\"" [a-z]{1,8} "\"" ws ":" ws value
value ::= "\"" ([^"\\] | "\\" ["\\nt])* "\"" | "-"? [0-9]+ | "true" | "[" ws (value ("," ws value)*)? "]"
ws ::= [ \n]{0,3}
)";

std::unique_ptr<Tokenizer> TiktokenFixture() {
  absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::Load("tests/fixtures/tiktoken_fixture/tokenizer.model");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

// Token t is allowed from the text `so_far` iff some sentence starts with so_far + bytes(t).
bool AllowedByBruteForce(const Grammar& g, const std::string& so_far, const std::string& bytes) {
  if (bytes.empty()) return false;
  ByteParser parser(g);
  ByteParser::StateId s = parser.initial();
  for (const char c : so_far + bytes) {
    s = parser.Next(s, static_cast<uint8_t>(c));
    if (s == ByteParser::kDead) return false;
  }
  return true;
}

// Random walks through the grammar, each mask checked token by token.
void CheckMasksAgainstBruteForce(const Tokenizer& tokenizer) {
  auto grammar = *Grammar::Parse(kJsonish);
  auto automaton = std::make_shared<TokenAutomaton>(grammar, TokenTrie::ForTokenizer(tokenizer));
  std::mt19937 rng(7);
  int steps = 0;
  for (int walk = 0; walk < 6; ++walk) {
    std::unique_ptr<TokenMatcher> m = *TokenMatcher::Start(automaton);
    std::string text;
    for (int step = 0; step < 40 && !m->complete(); ++step, ++steps) {
      std::shared_ptr<const TokenMask> mask = m->Allowed();
      std::vector<int> allowed;
      for (int t = 0; t < tokenizer.vocab_size(); ++t) {
        const bool expected = AllowedByBruteForce(*grammar, text, automaton->trie().bytes(t));
        ASSERT_EQ(MaskHas(mask->data(), t), expected) << "token " << t << " after \"" << text << "\"";
        if (expected) allowed.push_back(t);
      }
      ASSERT_FALSE(allowed.empty()) << "a live state allows no token after \"" << text << "\"";
      const int t = allowed[rng() % allowed.size()];
      ASSERT_TRUE(m->Accept(t).ok());
      text += automaton->trie().bytes(t);
    }
  }
  EXPECT_GT(steps, 100);
  EXPECT_GT(automaton->stats().mask_hits, 0);
}

TEST(TokenMatcherTest, MasksEqualBruteForceWithSentencePiece) { CheckMasksAgainstBruteForce(testing::FixtureTokenizer()); }

TEST(TokenMatcherTest, MasksEqualBruteForceWithTiktoken) {
  std::unique_ptr<Tokenizer> tokenizer = TiktokenFixture();
  ASSERT_NE(tokenizer, nullptr);
  CheckMasksAgainstBruteForce(*tokenizer);
}

// Masks put together from the top positions' splits equal the whole-trie
// walk's, state by state, along random walks through every schema of the
// corpus (strings inside nested objects and arrays, patterns, enums, ...)
// with both fixture vocabularies.
void CheckSplitMasksOnTheCorpus(const Tokenizer& tokenizer) {
  std::ifstream file("worker/grammar/testdata/schemas.json");
  ASSERT_TRUE(file);
  std::stringstream text;
  text << file.rdbuf();
  const nlohmann::ordered_json corpus = nlohmann::ordered_json::parse(text.str());
  ASSERT_GE(corpus.size(), 200u);
  const std::shared_ptr<const TokenTrie> trie = TokenTrie::ForTokenizer(tokenizer);
  std::mt19937 rng(11);
  int64_t compared = 0, splits = 0;
  for (const auto& entry : corpus) {
    absl::StatusOr<std::string> gbnf = JsonSchemaToGbnf(entry["schema"]);
    ASSERT_TRUE(gbnf.ok()) << entry["name"] << ": " << gbnf.status();
    auto automaton = std::make_shared<TokenAutomaton>(*Grammar::Parse(*gbnf), trie);
    for (int walk = 0; walk < 2; ++walk) {
      TokenAutomaton::StateId state = automaton->initial();
      for (int step = 0; step < 60 && automaton->live(state); ++step, ++compared) {
        const std::shared_ptr<const TokenMask> mask = automaton->Allowed(state);
        ASSERT_EQ(*mask, automaton->AllowedByWholeWalkForTesting(state)) << entry["name"] << " step " << step;
        std::vector<int> allowed;
        for (int t = 0; t < trie->vocab_size(); ++t) {
          if (MaskHas(mask->data(), t)) allowed.push_back(t);
        }
        if (allowed.empty()) break;
        state = automaton->Advance(state, allowed[rng() % allowed.size()]);
        ASSERT_NE(state, ByteParser::kDead);
      }
    }
    splits += automaton->stats().splits;
  }
  EXPECT_GT(compared, 5000);
  EXPECT_GT(splits, 0);
}

TEST(TokenMatcherTest, SplitMasksEqualWholeWalksOnTheCorpusWithSentencePiece) {
  CheckSplitMasksOnTheCorpus(testing::FixtureTokenizer());
}

TEST(TokenMatcherTest, SplitMasksEqualWholeWalksOnTheCorpusWithTiktoken) {
  std::unique_ptr<Tokenizer> tiktoken = TiktokenFixture();
  ASSERT_NE(tiktoken, nullptr);
  CheckSplitMasksOnTheCorpus(*tiktoken);
}

TEST(TokenMatcherTest, SentencePieceSpacesAndByteFallbackPiecesAreTheirBytes) {
  const Tokenizer& tokenizer = testing::FixtureTokenizer();
  auto trie = TokenTrie::ForTokenizer(tokenizer);
  int bytes = 0;
  for (int t = 0; t < tokenizer.vocab_size(); ++t) {
    const Tokenizer::Piece piece = tokenizer.GetPiece(t);
    if (piece.kind == Tokenizer::PieceKind::kByte) {
      ++bytes;
      EXPECT_EQ(trie->bytes(t), std::string(1, static_cast<char>(tokenizer.ByteValue(t))));
    } else if (piece.kind == Tokenizer::PieceKind::kNormal) {
      EXPECT_EQ(trie->bytes(t).find("\xE2\x96\x81"), std::string::npos) << piece.text;
    } else {
      EXPECT_EQ(trie->bytes(t), "") << "control piece " << piece.text << " would be allowed";
    }
  }
  EXPECT_EQ(bytes, 256);
  EXPECT_EQ(trie->bytes(tokenizer.bos_id()), "");
  EXPECT_EQ(trie->bytes(tokenizer.eos_id()), "");
}

TEST(TokenMatcherTest, SpecialTokensAreNeverInAMask) {
  std::unique_ptr<Tokenizer> tokenizer = TiktokenFixture();
  ASSERT_NE(tokenizer, nullptr);
  // A grammar that allows any text: only the special tokens stay out.
  auto automaton =
      std::make_shared<TokenAutomaton>(*Grammar::Parse("root ::= [\\x00-\\x7f]*"), TokenTrie::ForTokenizer(*tokenizer));
  std::unique_ptr<TokenMatcher> m = *TokenMatcher::Start(automaton);
  std::shared_ptr<const TokenMask> mask = m->Allowed();
  EXPECT_FALSE(MaskHas(mask->data(), tokenizer->SpecialId("<|eot_id|>")));
  EXPECT_FALSE(MaskHas(mask->data(), tokenizer->SpecialId("<|begin_of_text|>")));
  EXPECT_TRUE(MaskHas(mask->data(), 'a'));  // Single bytes are ranks 0-255.
  EXPECT_TRUE(m->accepting());
  EXPECT_FALSE(m->complete());
  EXPECT_FALSE(m->Accept(tokenizer->SpecialId("<|eot_id|>")).ok());
}

TEST(TokenMatcherTest, CompleteWhenNothingCanFollow) {
  std::unique_ptr<Tokenizer> tokenizer = TiktokenFixture();
  ASSERT_NE(tokenizer, nullptr);
  auto automaton = std::make_shared<TokenAutomaton>(*Grammar::Parse("root ::= \"ab\""), TokenTrie::ForTokenizer(*tokenizer));
  std::unique_ptr<TokenMatcher> m = *TokenMatcher::Start(automaton);
  EXPECT_FALSE(m->accepting());
  ASSERT_TRUE(m->Accept('a').ok());
  EXPECT_FALSE(m->Accept('a').ok());
  ASSERT_TRUE(m->Accept('b').ok());
  EXPECT_TRUE(m->complete());
  std::shared_ptr<const TokenMask> mask = m->Allowed();
  for (int t = 0; t < tokenizer->vocab_size(); ++t) ASSERT_FALSE(MaskHas(mask->data(), t)) << t;
}

TEST(TokenMatcherTest, TokensWithEqualBytesAreAllowedTogether) {
  auto trie = TokenTrie::Build({"a", "", "ab", "a", "b", "abc"});
  auto automaton = std::make_shared<TokenAutomaton>(*Grammar::Parse("root ::= \"ab\" \"c\"?"), trie);
  std::unique_ptr<TokenMatcher> m = *TokenMatcher::Start(automaton);
  std::shared_ptr<const TokenMask> mask = m->Allowed();
  EXPECT_TRUE(MaskHas(mask->data(), 0));
  EXPECT_FALSE(MaskHas(mask->data(), 1));
  EXPECT_TRUE(MaskHas(mask->data(), 2));
  EXPECT_TRUE(MaskHas(mask->data(), 3));
  EXPECT_FALSE(MaskHas(mask->data(), 4));
  EXPECT_TRUE(MaskHas(mask->data(), 5));
}

}  // namespace
}  // namespace llama::grammar
