// Whether a JSON Schema's grammar (json_schema.h) takes given JSON
// instances, and whether its verdicts agree with what the schema says:
// what tools/grammar_check reports, and what the JSON-Schema-Test-Suite
// test runs.

#ifndef LLAMA_WORKER_GRAMMAR_SCHEMA_CHECK_H_
#define LLAMA_WORKER_GRAMMAR_SCHEMA_CHECK_H_

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "tokenizer/tokenizer.h"
#include "worker/grammar/grammar.h"
#include "worker/grammar/token_matcher.h"

namespace llama::grammar {

// `instance` as structured output writes it for `schema`: JsonText (compact,
// 2.0 as 2), and each object's keys in the order the schema first names
// them (in "properties", then "required", or in a const or enum object,
// anywhere in the document), keys it never names after them in their own
// order. The grammar writes properties in
// the schema's order (json_schema.h); this is that order for the instances
// whose objects all follow one schema's, as a test suite's do.
std::string InGrammarOrder(const nlohmann::ordered_json& schema, const nlohmann::ordered_json& instance);

// One schema's grammar, checking texts.
class SchemaChecker {
 public:
  // An error (InvalidArgument, from JsonSchemaToGbnf) when the schema does
  // not compile. With a tokenizer, texts are also forced through a
  // TokenMatcher as its tokens.
  static absl::StatusOr<std::unique_ptr<SchemaChecker>> Create(const nlohmann::ordered_json& schema,
                                                               const Tokenizer* tokenizer);

  struct Verdict {
    bool accepted = false;  // Grammar::Accepts.
    // The text's tokens each allowed by the matcher's mask in turn, ending
    // where a stop token may: nullopt without a tokenizer, or where the
    // tokens do not spell the text (SentencePiece's leading space).
    std::optional<bool> tokens_accepted;
  };
  Verdict Check(const std::string& text) const;

  const std::string& gbnf() const { return gbnf_; }

 private:
  SchemaChecker() = default;

  std::string gbnf_;
  std::shared_ptr<const Grammar> grammar_;
  const Tokenizer* tokenizer_ = nullptr;
  std::shared_ptr<TokenAutomaton> automaton_;
};

}  // namespace llama::grammar

#endif  // LLAMA_WORKER_GRAMMAR_SCHEMA_CHECK_H_
