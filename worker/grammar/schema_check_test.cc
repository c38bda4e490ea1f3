#include "worker/grammar/schema_check.h"

#include <gtest/gtest.h>

#include "tokenizer/tokenizer.h"

namespace llama::grammar {
namespace {

using ::nlohmann::ordered_json;

TEST(InGrammarOrderTest, KeysInTheSchemasOrderAndWholeNumbersWithoutFraction) {
  const ordered_json schema = ordered_json::parse(R"({"properties": {"b": {"properties": {"y": {}, "x": {}}},
      "a": {"const": {"q": 1, "p": 2}}}, "required": ["c"]})");
  const ordered_json instance =
      ordered_json::parse(R"({"z": 1.0, "c": 2, "a": {"p": 2, "q": 1}, "b": {"x": [1.5, 3.0], "y": null}})");
  EXPECT_EQ(InGrammarOrder(schema, instance), R"({"b":{"y":null,"x":[1.5,3]},"a":{"q":1,"p":2},"c":2,"z":1})");
}

TEST(SchemaCheckerTest, GrammarAndTokensAgree) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      Tokenizer::Load("tests/fixtures/tiktoken_fixture/tokenizer.model");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  absl::StatusOr<std::unique_ptr<SchemaChecker>> checker = SchemaChecker::Create(
      ordered_json::parse(R"({"properties": {"name": {"type": "string"}}, "required": ["name"]})"), tokenizer->get());
  ASSERT_TRUE(checker.ok()) << checker.status();
  for (const auto& [text, accepted] : std::vector<std::pair<std::string, bool>>{
           {R"({"name":"Ada Lovelace"})", true}, {R"({"name": "x"})", true}, {R"({"name":1})", false},
           {R"({"name":"x")", false}, {R"({"name":"x"} )", false}}) {
    const SchemaChecker::Verdict v = (*checker)->Check(text);
    EXPECT_EQ(v.accepted, accepted) << text;
    ASSERT_TRUE(v.tokens_accepted.has_value()) << text;
    EXPECT_EQ(*v.tokens_accepted, accepted) << text;
  }
  EXPECT_FALSE(SchemaChecker::Create(ordered_json::parse(R"({"not": {}})"), nullptr).ok());
  const SchemaChecker::Verdict without_tokenizer =
      (*SchemaChecker::Create(ordered_json::parse("{}"), nullptr))->Check("[1]");
  EXPECT_TRUE(without_tokenizer.accepted);
  EXPECT_FALSE(without_tokenizer.tokens_accepted.has_value());
}

}  // namespace
}  // namespace llama::grammar
