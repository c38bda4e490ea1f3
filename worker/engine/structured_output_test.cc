// Structured output end to end on the fixture models (random weights, so
// nothing but the constraint makes the output valid): every schema of
// worker/grammar's corpus, greedy and sampled, with Llama 2's SentencePiece
// and Llama 3's tiktoken tokenizers, all requests on one engine at once;
// then python-jsonschema (worker/grammar/testdata/validate_outputs.py)
// checks every answer, knowing nothing of our grammar code.

#include <fstream>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"
#include "worker/engine/engine.h"
#include "worker/grammar/grammar_cache.h"
#include "worker/grammar/json_schema.h"
#include "worker/grammar/output_validation.h"
#include "worker/grammar/regex_to_gbnf.h"
#include "worker/model/golden_fixture.h"

namespace llama {

using grammar::ChoiceGbnf;
using grammar::GrammarCache;
using grammar::JsonSchemaToGbnf;
using grammar::RegexToGbnf;
using grammar::TokenAutomaton;
using grammar::TokenMatcher;
namespace {

struct Fixture {
  const char* model;
  const char* tokenizer;
};

class StructuredOutputTest : public ::testing::TestWithParam<Fixture> {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::Load(GetParam().tokenizer);
    ASSERT_TRUE(t.ok()) << t.status();
    tokenizer_ = *std::move(t);
    TransformerOptions options;
    options.max_batch_size = 32;
    options.max_seq_len = 1024;
    options.max_step_tokens = 256;
    model_ = testing::MakeModel(GetParam().model, &comm_, options);
    ASSERT_EQ(model_->limits().vocab_size, tokenizer_->vocab_size());
    cache_ = std::make_unique<GrammarCache>(tokenizer_.get());
  }

  struct Answer {
    std::vector<int> tokens;
    FinishReason finish = FinishReason::kError;
    absl::Status status;
  };

  // Runs every grammar greedy and sampled at once; the answers' texts, in
  // that order.
  std::vector<std::string> Generate(const std::vector<std::string>& grammars) {
    Engine engine(model_.get(), {});
    std::vector<Answer> answers(2 * grammars.size());
    const std::vector<int> prompt = *tokenizer_->Encode("Answer in JSON:", /*bos=*/true, /*eos=*/false);
    for (size_t i = 0; i < answers.size(); ++i) {
      absl::StatusOr<std::shared_ptr<TokenAutomaton>> automaton = cache_->Get(grammars[i / 2]);
      EXPECT_TRUE(automaton.ok()) << automaton.status();
      if (!automaton.ok()) return {};
      EngineRequest r;
      r.prompt = prompt;
      r.temperature = i % 2 == 0 ? 0.0f : 1.0f;
      r.seed = i;
      r.max_new_tokens = 900;
      r.stop_ids = tokenizer_->stop_ids();
      r.grammar = *TokenMatcher::Start(*automaton);
      Answer* a = &answers[i];
      r.sink = [a](const RequestEvent& e) {
        if (e.kind == RequestEvent::kToken) a->tokens.push_back(e.token);
        if (e.kind == RequestEvent::kFinished) {
          a->finish = e.finish;
          a->status = e.status;
        }
      };
      EXPECT_TRUE(engine.Submit(std::move(r)).ok());
    }
    const absl::Status run = engine.RunUntilIdle();
    EXPECT_TRUE(run.ok()) << run;
    std::vector<std::string> texts;
    for (Answer& a : answers) {
      EXPECT_EQ(a.finish, FinishReason::kStop) << a.status << " after " << a.tokens.size() << " tokens";
      const std::vector<int>& stops = tokenizer_->stop_ids();
      if (!a.tokens.empty() && std::count(stops.begin(), stops.end(), a.tokens.back())) a.tokens.pop_back();
      texts.push_back(*tokenizer_->Decode(a.tokens));
    }
    return texts;
  }

  LocalCommunicator comm_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Transformer> model_;
  std::unique_ptr<GrammarCache> cache_;
};

TEST_P(StructuredOutputTest, EveryAnswerValidatesAgainstItsSchema) {
  std::ifstream file("worker/grammar/testdata/schemas.json");
  ASSERT_TRUE(file);
  std::stringstream text;
  text << file.rdbuf();
  const nlohmann::ordered_json corpus = nlohmann::ordered_json::parse(text.str());
  ASSERT_GE(corpus.size(), 200u);
  std::vector<std::string> grammars;
  for (const auto& entry : corpus) grammars.push_back(*JsonSchemaToGbnf(entry["schema"]));
  const std::vector<std::string> texts = Generate(grammars);
  ASSERT_EQ(texts.size(), 2 * corpus.size());
  nlohmann::ordered_json results = nlohmann::ordered_json::array();
  for (size_t i = 0; i < corpus.size(); ++i) {
    results.push_back({{"name", corpus[i]["name"]}, {"schema", corpus[i]["schema"]},
                       {"outputs", {texts[2 * i], texts[2 * i + 1]}}});
  }
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/results.json";
  std::ofstream(path) << results.dump(1);
  const grammar::ValidationReport report = grammar::ValidateOutputs(path);
  EXPECT_TRUE(report.valid) << report.text;
  std::printf("%s: %s", GetParam().model, report.text.c_str());
}

TEST_P(StructuredOutputTest, AGrammarOfOneStringGivesExactlyIt) {
  const std::string value = R"({"a":[1,"x y"],"b":null})";
  const nlohmann::ordered_json schema = {{"const", nlohmann::ordered_json::parse(value)}};
  for (const std::string& text : Generate({*JsonSchemaToGbnf(schema)})) EXPECT_EQ(text, value);
}

TEST_P(StructuredOutputTest, ChoicesAndRegularExpressions) {
  const std::vector<std::string> choices = {"yes", "no", "maybe so"};
  const std::vector<std::string> texts = Generate({ChoiceGbnf(choices), *RegexToGbnf(R"([A-Z]{2}-\d{3}(x|yz)?)")});
  ASSERT_EQ(texts.size(), 4u);
  for (int i = 0; i < 2; ++i) EXPECT_NE(std::find(choices.begin(), choices.end(), texts[i]), choices.end()) << texts[i];
  for (int i = 2; i < 4; ++i) EXPECT_TRUE(std::regex_match(texts[i], std::regex(R"([A-Z]{2}-\d{3}(x|yz)?)"))) << texts[i];
}

INSTANTIATE_TEST_SUITE_P(
    Tokenizers, StructuredOutputTest,
    ::testing::Values(Fixture{"tiny_fp32_mp1", "tests/fixtures/tokenizer_fixture/tokenizer.model"},
                      Fixture{"llama3_bf16_mp1", "tests/fixtures/tiktoken_fixture/tokenizer.model"}),
    [](const ::testing::TestParamInfo<Fixture>& info) {
      return std::string(info.param.model[0] == 'l' ? "Llama3Tiktoken" : "Llama2SentencePiece");
    });

}  // namespace
}  // namespace llama
