// Whether two regular expressions can match one string: what tells apart
// the branches of a JSON Schema oneOf that differ only in their "pattern"
// (json_schema_alternatives.cc). Internal to //worker/grammar.

#ifndef LLAMA_WORKER_GRAMMAR_REGEX_OVERLAP_H_
#define LLAMA_WORKER_GRAMMAR_REGEX_OVERLAP_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace llama::grammar::internal_grammar {

// Whether some string is both a whole match of `whole` (as RegexToGbnf and
// a JSON Schema "pattern" compiled by json_schema.h write it) and one in
// which `search` matches somewhere, as a "pattern" validates: the product
// of their automata searched for a common string. An error where either
// does not parse (regex_parser.h) or the search outgrows its budget: then
// nothing is known.
absl::StatusOr<bool> WholeMatchMeetsSearch(absl::string_view whole, absl::string_view search);

}  // namespace llama::grammar::internal_grammar

#endif  // LLAMA_WORKER_GRAMMAR_REGEX_OVERLAP_H_
