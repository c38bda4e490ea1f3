#include "worker/grammar/schema_check.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "base/status_macros.h"
#include "worker/grammar/json_schema.h"

namespace llama::grammar {
namespace {

using ::nlohmann::ordered_json;

// Every key of every object in `value`, depth first, each at the rank it is
// first met.
void CollectKeys(const ordered_json& value, absl::flat_hash_map<std::string, size_t>& rank) {
  if (!value.is_structured()) return;
  for (const auto& kv : value.items()) {
    if (value.is_object()) rank.emplace(kv.key(), rank.size());
    CollectKeys(kv.value(), rank);
  }
}

// Every key "properties" and "required" name in `node`, and the keys of
// the objects in "const" and "enum" (written as given), depth first in
// document order, each at the rank it is first met.
void CollectKeyOrder(const ordered_json& node, absl::flat_hash_map<std::string, size_t>& rank) {
  if (node.is_object()) {
    for (const char* values : {"const", "enum"}) {
      if (node.contains(values)) CollectKeys(node[values], rank);
    }
    if (node.contains("properties") && node["properties"].is_object()) {
      for (const auto& kv : node["properties"].items()) rank.emplace(kv.key(), rank.size());
    }
    if (node.contains("required") && node["required"].is_array()) {
      for (const ordered_json& key : node["required"]) {
        if (key.is_string()) rank.emplace(key.get<std::string>(), rank.size());
      }
    }
    for (const auto& kv : node.items()) CollectKeyOrder(kv.value(), rank);
  } else if (node.is_array()) {
    for (const ordered_json& item : node) CollectKeyOrder(item, rank);
  }
}

ordered_json Reordered(const ordered_json& value, const absl::flat_hash_map<std::string, size_t>& rank) {
  if (value.is_array()) {
    ordered_json out = ordered_json::array();
    for (const ordered_json& item : value) out.push_back(Reordered(item, rank));
    return out;
  }
  if (!value.is_object()) return value;
  std::vector<std::pair<std::string, const ordered_json*>> members;
  for (const auto& kv : value.items()) members.emplace_back(kv.key(), &kv.value());
  auto rank_of = [&](const std::string& key) {
    const auto it = rank.find(key);
    return it == rank.end() ? rank.size() : it->second;
  };
  std::stable_sort(members.begin(), members.end(),
                   [&](const auto& a, const auto& b) { return rank_of(a.first) < rank_of(b.first); });
  ordered_json out = ordered_json::object();
  for (const auto& [key, member] : members) out[key] = Reordered(*member, rank);
  return out;
}

}  // namespace

std::string InGrammarOrder(const ordered_json& schema, const ordered_json& instance) {
  absl::flat_hash_map<std::string, size_t> rank;
  CollectKeyOrder(schema, rank);
  return JsonText(Reordered(instance, rank));
}

absl::StatusOr<std::unique_ptr<SchemaChecker>> SchemaChecker::Create(const ordered_json& schema,
                                                                     const Tokenizer* tokenizer) {
  std::unique_ptr<SchemaChecker> checker(new SchemaChecker());
  ASSIGN_OR_RETURN(checker->gbnf_, JsonSchemaToGbnf(schema));
  ASSIGN_OR_RETURN(checker->grammar_, Grammar::Parse(checker->gbnf_));
  checker->tokenizer_ = tokenizer;
  if (tokenizer != nullptr) {
    checker->automaton_ = std::make_shared<TokenAutomaton>(checker->grammar_, TokenTrie::ForTokenizer(*tokenizer));
  }
  return checker;
}

SchemaChecker::Verdict SchemaChecker::Check(const std::string& text) const {
  Verdict verdict;
  verdict.accepted = grammar_->Accepts(text);
  if (automaton_ == nullptr) return verdict;
  verdict.tokens_accepted = false;
  const absl::StatusOr<std::vector<int>> tokens = tokenizer_->Encode(text, /*bos=*/false, /*eos=*/false);
  absl::StatusOr<std::unique_ptr<TokenMatcher>> matcher = TokenMatcher::Start(automaton_);
  if (!tokens.ok() || !matcher.ok()) return verdict;
  std::string spelled;
  for (const int token : *tokens) spelled += automaton_->trie().bytes(token);
  if (spelled != text) {  // SentencePiece's leading space, say: not what a model would write.
    verdict.tokens_accepted.reset();
    return verdict;
  }
  for (const int token : *tokens) {
    if (!MaskHas((*matcher)->Allowed()->data(), token) || !(*matcher)->Accept(token).ok()) return verdict;
  }
  verdict.tokens_accepted = (*matcher)->accepting();
  return verdict;
}

}  // namespace llama::grammar
