// The schemas testdata/make_schemas.py writes for the end-to-end tests: each
// compiles to a grammar that Grammar::Parse takes, and that grammar accepts
// the valid example written beside it.

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "worker/grammar/grammar.h"
#include "worker/grammar/json_schema.h"

namespace llama::grammar {
namespace {

TEST(JsonSchemaCorpusTest, EverySchemaCompilesAndTakesItsExample) {
  std::ifstream file("worker/grammar/testdata/schemas.json");
  ASSERT_TRUE(file) << "worker/grammar/testdata/schemas.json";
  std::stringstream text;
  text << file.rdbuf();
  const nlohmann::ordered_json corpus = nlohmann::ordered_json::parse(text.str());
  EXPECT_GE(corpus.size(), 200u);
  for (const nlohmann::ordered_json& entry : corpus) {
    const std::string name = entry["name"].get<std::string>();
    absl::StatusOr<std::string> gbnf = JsonSchemaToGbnf(entry["schema"]);
    ASSERT_TRUE(gbnf.ok()) << name << ": " << gbnf.status();
    absl::StatusOr<std::shared_ptr<const Grammar>> grammar = Grammar::Parse(*gbnf);
    ASSERT_TRUE(grammar.ok()) << name << ": " << grammar.status() << "\n" << *gbnf;
    const std::string example = entry["example"].get<std::string>();
    EXPECT_TRUE((*grammar)->Accepts(example)) << name << ": " << example << "\n" << *gbnf;
  }
}

}  // namespace
}  // namespace llama::grammar
