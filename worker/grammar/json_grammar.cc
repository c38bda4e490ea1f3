#include "worker/grammar/json_grammar.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace llama::grammar::internal_grammar {
namespace {

struct JsonRule {
  const char* name;
  const char* body;
  std::vector<const char*> uses;
};

// The \u escapes leave out U+D800-U+DFFF (see json_grammar.h).
const std::vector<JsonRule>& JsonRules() {
  static const auto* rules = new std::vector<JsonRule>{
      {"space", R"((" " | "\n" [ \t]{0,20})?)", {}},
      {"value",
       "object | array | string | number | boolean | null",
       {"object", "array", "string", "number", "boolean", "null"}},
      {"object", R"("{" space (member space ("," space member space)*)? "}")", {"space", "member"}},
      {"member", R"(string space ":" space value)", {"string", "space", "value"}},
      {"array", R"("[" space (value space ("," space value space)*)? "]")", {"space", "value"}},
      {"string", R"("\"" char* "\"")", {"char"}},
      {"char", R"([^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" hex-escape))", {"hex-escape"}},
      {"hex-escape", R"([0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2})", {}},
      {"plain-char", R"([^"\\\x00-\x1F])", {}},
      {"number", R"("-"? integral-part ("." fraction)? exponent?)", {"integral-part", "fraction", "exponent"}},
      {"integer", R"("-"? integral-part)", {"integral-part"}},
      // Numbers that are not whole, with a fraction that a double keeps
      // apart from every integer (at most 14 significant digits).
      {"non-integer", R"("-"? ("0" | [1-9] [0-9]{0,6}) "." [0-9]{0,6} [1-9])", {}},
      {"integral-part", R"("0" | [1-9] [0-9]{0,15})", {}},
      {"fraction", "[0-9]{1,16}", {}},
      {"exponent", "[eE] [-+]? [0-9]{1,2}", {}},
      {"boolean", R"("true" | "false")", {}},
      {"null", R"("null")", {}},
  };
  return *rules;
}

const JsonRule* FindJsonRule(absl::string_view name) {
  for (const JsonRule& rule : JsonRules()) {
    if (rule.name == name) return &rule;
  }
  return nullptr;
}

bool EndsInNumber(absl::string_view name) {
  const size_t dash = name.rfind('-');
  if (dash == absl::string_view::npos || dash + 1 == name.size()) return false;
  const absl::string_view tail = name.substr(dash + 1);
  return std::all_of(tail.begin(), tail.end(), [](char c) { return absl::ascii_isdigit(c); });
}

}  // namespace

GbnfRules::GbnfRules() {
  // Reserved so that a schema's names never take them.
  for (const JsonRule& rule : JsonRules()) taken_.insert(rule.name);
}

std::string GbnfRules::NewName(absl::string_view hint) {
  std::string base;
  for (char c : hint) {
    const bool keep = absl::ascii_isalnum(c) || c == '_';
    if (keep)
      base += c;
    else if (!base.empty() && base.back() != '-')
      base += '-';
  }
  while (!base.empty() && base.back() == '-') base.pop_back();
  if (base.empty()) base = "rule";
  if (EndsInNumber(base)) base.insert(base.rfind('-') + 1, "_");
  std::string name = base;
  for (int i = 2; taken_.contains(name); ++i) name = absl::StrCat(base, "_", i);
  taken_.insert(name);
  return name;
}

void GbnfRules::Define(const std::string& name, std::string body) {
  if (bodies_.emplace(name, std::move(body)).second) order_.push_back(name);
}

std::string GbnfRules::Use(absl::string_view primitive) {
  const JsonRule* rule = FindJsonRule(primitive);
  const std::string name(primitive);
  if (rule == nullptr || Defined(name)) return name;
  Define(name, rule->body);
  for (const char* used : rule->uses) Use(used);
  return name;
}

std::string GbnfRules::Text() const {
  std::string text;
  auto write = [&](const std::string& name) { absl::StrAppend(&text, name, " ::= ", bodies_.at(name), "\n"); };
  if (Defined("root")) write("root");
  for (const std::string& name : order_) {
    if (name != "root") write(name);
  }
  return text;
}

}  // namespace llama::grammar::internal_grammar
