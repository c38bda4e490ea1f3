// The rules of JSON text shared by the grammars json_schema.cc writes, and
// the rule set they are collected in. Internal to //worker/grammar.
//
// Whitespace: `space` (nothing, one space, or a newline and up to 20 spaces
// or tabs, as llama.cpp's converter allows) may follow [ { , : and precede
// ] } , :, and nowhere else: a value has no whitespace before or after it,
// and a model cannot fill its budget with blanks. Strings are JSON strings
// with every escape; \u escapes of surrogates are left out, so a `char` is
// one code point, as minLength and maxLength count them. Numbers follow
// JSON's grammar with at most 16 integer and 16 fraction digits and a
// two-digit exponent, so that every one is a finite double and generation
// ends; numbers with bounds have no exponent (json_schema_scalars.cc).

#ifndef LLAMA_WORKER_GRAMMAR_JSON_GRAMMAR_H_
#define LLAMA_WORKER_GRAMMAR_JSON_GRAMMAR_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"

namespace llama::grammar::internal_grammar {

// Rules by name, written out in the order they were defined, `root` first.
// Not thread-safe; one per conversion.
class GbnfRules {
 public:
  GbnfRules();

  // A name not yet taken, made of `hint`'s letters and digits (others
  // become '-'). It never ends in "-<digits>", the names Grammar::Parse
  // gives the rules it makes for groups.
  std::string NewName(absl::string_view hint);

  void Define(const std::string& name, std::string body);
  bool Defined(const std::string& name) const { return bodies_.contains(name); }

  // The name of a rule of JSON text (see kJsonRules in json_grammar.cc:
  // value, object, array, string, char, number, integer, boolean, null,
  // space, ...), defined with the rules it uses the first time it is used.
  std::string Use(absl::string_view primitive);

  // All rules as GBNF text.
  std::string Text() const;

 private:
  absl::flat_hash_set<std::string> taken_;
  absl::flat_hash_map<std::string, std::string> bodies_;
  std::vector<std::string> order_;
};

}  // namespace llama::grammar::internal_grammar

#endif  // LLAMA_WORKER_GRAMMAR_JSON_GRAMMAR_H_
