// Structured output end to end on the fixture models (random weights, so
// nothing but the constraint makes the output valid): every schema of
// worker/grammar's corpus, greedy and sampled, with Llama 2's SentencePiece
// and Llama 3's tiktoken tokenizers, all requests on one engine at once;
// then python-jsonschema (worker/grammar/testdata/validate_outputs.py)
// checks every answer, knowing nothing of our grammar code. A constrained
// request gives the same bits alone and under load.

#include <fstream>
#include <random>
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
#include "worker/grammar/token_matcher.h"
#include "worker/model/golden_fixture.h"

namespace llama {

using grammar::ChoiceGbnf;
using grammar::GrammarCache;
using grammar::JsonSchemaToGbnf;
using grammar::RegexToGbnf;
using grammar::TokenAutomaton;
using grammar::TokenMatcher;
namespace {

nlohmann::ordered_json Corpus() {
  std::ifstream file("worker/grammar/testdata/schemas.json");
  std::stringstream text;
  text << file.rdbuf();
  return nlohmann::ordered_json::parse(text.str());
}

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
    std::string text;  // The tokens decoded, without the stop token.
  };

  // Runs every grammar greedy and sampled at once; the answers, in that
  // order. A `closing_bias` is added to the logits of the tokens that close
  // strings, arrays and objects (their bytes all '"', ']' or '}') and of the
  // stop tokens: random
  // weights would otherwise write a free string or array until the token
  // limit. It moves the choice among the tokens the grammar allows, never
  // what the grammar allows.
  std::vector<Answer> Answers(const std::vector<std::string>& grammars, int max_new_tokens,
                              float closing_bias = 0.0f) {
    std::vector<LogitBias> bias;
    if (closing_bias != 0.0f) {
      const std::shared_ptr<const grammar::TokenTrie> trie = grammar::TokenTrie::ForTokenizer(*tokenizer_);
      for (int t = 0; t < trie->vocab_size(); ++t) {
        const std::string& bytes = trie->bytes(t);
        if (!bytes.empty() && bytes.find_first_not_of("\"]}") == std::string::npos) bias.push_back({t, closing_bias});
      }
      for (const int stop : tokenizer_->stop_ids()) bias.push_back({stop, closing_bias});
    }
    Engine engine(model_.get(), {});
    std::vector<Answer> answers(2 * grammars.size());
    const std::vector<int> prompt = *tokenizer_->Encode("Answer in JSON:", /*bos=*/true, /*eos=*/false);
    for (size_t i = 0; i < answers.size(); ++i) {
      absl::StatusOr<std::shared_ptr<TokenAutomaton>> automaton = cache_->Get(grammars[i / 2]);
      EXPECT_TRUE(automaton.ok()) << automaton.status();
      if (!automaton.ok()) return {};
      EngineRequest r;
      r.prompt = prompt;
      r.sampling.token.temperature = i % 2 == 0 ? 0.0f : 1.0f;
      r.sampling.seed = i;
      r.sampling.logit_bias = bias;
      r.max_new_tokens = max_new_tokens;
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
    const std::vector<int>& stops = tokenizer_->stop_ids();
    for (Answer& a : answers) {
      std::vector<int> tokens = a.tokens;
      if (!tokens.empty() && std::count(stops.begin(), stops.end(), tokens.back())) tokens.pop_back();
      a.text = *tokenizer_->Decode(tokens);
    }
    return answers;
  }

  // The answers' texts, each of which must have ended at a stop token.
  std::vector<std::string> Generate(const std::vector<std::string>& grammars) {
    std::vector<std::string> texts;
    for (const Answer& a : Answers(grammars, 900)) {
      EXPECT_EQ(a.finish, FinishReason::kStop) << a.status << " after " << a.tokens.size() << " tokens";
      texts.push_back(a.text);
    }
    return texts;
  }

  LocalCommunicator comm_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Transformer> model_;
  std::unique_ptr<GrammarCache> cache_;
};

TEST_P(StructuredOutputTest, EveryAnswerValidatesAgainstItsSchema) {
  const nlohmann::ordered_json corpus = Corpus();
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

// The real-schema corpus (worker/grammar/testdata/real_schemas: JSON Schema
// Store's catalogue and OpenAI's OpenAPI components): every schema the
// converter compiles is answered greedy and sampled, and every answer that
// ends at a stop token must validate under python-jsonschema with format
// checks. An answer cut at the token limit ends "length", which the server
// says; those are counted, not validated, and bounded: random weights keep
// writing inside free strings and arrays (measured: 390 of 3,118 answers
// with the SentencePiece fixture, 38 with tiktoken's).
TEST_P(StructuredOutputTest, EveryAnswerToARealSchemaValidates) {
  std::ifstream file("worker/grammar/testdata/real_schemas/corpus.jsonl");
  ASSERT_TRUE(file) << "worker/grammar/testdata/real_schemas/corpus.jsonl";
  std::vector<nlohmann::ordered_json> compiled;
  std::vector<std::string> grammars;
  int schemas = 0;
  for (std::string line; std::getline(file, line);) {
    nlohmann::ordered_json entry = nlohmann::ordered_json::parse(line);
    ++schemas;
    absl::StatusOr<std::string> gbnf = JsonSchemaToGbnf(entry["schema"]);
    if (!gbnf.ok() || !cache_->Get(*gbnf).ok()) continue;  // Refused, as the server refuses it.
    grammars.push_back(*std::move(gbnf));
    compiled.push_back(std::move(entry));
  }
  ASSERT_GE(schemas, 1000);
  const std::vector<Answer> answers = Answers(grammars, 1500, /*closing_bias=*/8.0f);
  ASSERT_EQ(answers.size(), 2 * compiled.size());
  nlohmann::ordered_json results = nlohmann::ordered_json::array();
  int cut = 0;
  for (size_t i = 0; i < compiled.size(); ++i) {
    nlohmann::ordered_json outputs = nlohmann::ordered_json::array();
    for (const Answer& a : {answers[2 * i], answers[2 * i + 1]}) {
      EXPECT_NE(a.finish, FinishReason::kError) << compiled[i]["name"] << ": " << a.status;
      if (a.finish == FinishReason::kStop) outputs.push_back(a.text);
      if (a.finish == FinishReason::kLength) ++cut;
    }
    results.push_back({{"name", compiled[i]["source"]}, {"schema", compiled[i]["schema"]}, {"outputs", outputs}});
  }
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/real_results.json";
  std::ofstream(path) << results.dump(1);
  const grammar::ValidationReport report = grammar::ValidateOutputs(path);
  EXPECT_TRUE(report.valid) << report.text;
  EXPECT_LE(cut, static_cast<int>(answers.size()) / 5) << "answers cut at the token limit";
  std::printf("%s: %zu of %d real schemas compiled; %zu answers, %d cut at 1500 tokens; %s", GetParam().model,
              compiled.size(), schemas, answers.size(), cut, report.text.c_str());
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

// A constrained request's tokens and log-probabilities, bit for bit, are
// the same alone and among 16 unconstrained requests (and its constrained
// peers) arriving while it runs: the mask touches only its own row, and
// the CPU kernels give a row the same bits whatever the batch.
TEST_P(StructuredOutputTest, ConstrainedRequestsGiveTheSameBitsAloneAndAmongSixteenOthers) {
  const nlohmann::ordered_json corpus = Corpus();
  struct Run {
    std::vector<int> tokens;
    std::vector<float> logprobs;
    FinishReason finish = FinishReason::kError;
  };
  const auto sink = [](Run* out) {
    return [out](const RequestEvent& e) {
      if (e.kind == RequestEvent::kToken) {
        out->tokens.push_back(e.token);
        out->logprobs.push_back(e.logprob);
      }
      if (e.kind == RequestEvent::kFinished) out->finish = e.finish;
    };
  };
  const std::vector<int> prompt = *tokenizer_->Encode("Answer in JSON:", /*bos=*/true, /*eos=*/false);
  constexpr int kConstrained = 4;
  const auto constrained = [&](int i, Run* out) {
    EngineRequest r;
    r.prompt = prompt;
    r.sampling.token.temperature = i % 2 == 0 ? 0.0f : 0.9f;
    r.sampling.token.top_p = 0.95f;
    r.sampling.seed = 100 + i;
    r.max_new_tokens = 300;
    r.stop_ids = tokenizer_->stop_ids();
    absl::StatusOr<std::shared_ptr<TokenAutomaton>> automaton =
        cache_->Get(*JsonSchemaToGbnf(corpus[i * corpus.size() / kConstrained]["schema"]));
    EXPECT_TRUE(automaton.ok()) << automaton.status();
    r.grammar = *TokenMatcher::Start(*automaton);
    r.sink = sink(out);
    return r;
  };
  std::mt19937 random(7);
  const int64_t vocab = tokenizer_->vocab_size();
  const auto unconstrained = [&](Run* out) {
    EngineRequest r;
    for (int n = 1 + random() % 60; n > 0; --n) r.prompt.push_back(3 + static_cast<int>(random() % (vocab - 3)));
    r.sampling.token.temperature = 0.8f;
    r.sampling.seed = random();
    r.max_new_tokens = 10 + random() % 50;
    r.sink = sink(out);
    return r;
  };

  std::vector<Run> alone(kConstrained);
  for (int i = 0; i < kConstrained; ++i) {
    Engine engine(model_.get(), {});
    ASSERT_TRUE(engine.Submit(constrained(i, &alone[i])).ok());
    ASSERT_TRUE(engine.RunUntilIdle().ok());
  }
  Engine engine(model_.get(), {});
  std::vector<Run> together(kConstrained), others(16);
  for (int step = 0; step < 12; ++step) {  // Arrivals in the first steps, interleaved.
    if (step % 3 == 0) {
      ASSERT_TRUE(engine.Submit(constrained(step / 3, &together[step / 3])).ok());
    }
    for (int j = step; j < 16; j += 12) ASSERT_TRUE(engine.Submit(unconstrained(&others[j])).ok());
    ASSERT_TRUE(engine.Step().ok());
  }
  ASSERT_TRUE(engine.RunUntilIdle().ok());
  for (int i = 0; i < kConstrained; ++i) {
    SCOPED_TRACE("constrained request " + std::to_string(i));
    EXPECT_EQ(alone[i].finish, FinishReason::kStop);
    EXPECT_EQ(together[i].finish, alone[i].finish);
    EXPECT_EQ(together[i].tokens, alone[i].tokens);
    EXPECT_EQ(together[i].logprobs, alone[i].logprobs);
    EXPECT_GT(alone[i].tokens.size(), 2u);
  }
  for (const Run& other : others) EXPECT_NE(other.finish, FinishReason::kError);
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
