// What a JSON Schema "pattern" matches, as every reader (ECMAScript, and
// Python's re that python-jsonschema uses) or some reader takes it: whether
// it matches a given string (enum values beside a pattern, keys beside
// patternProperties), and whether two can match one string (what tells
// apart the branches of a oneOf that differ in their patterns). A pattern
// matches anywhere in a string unless anchored (^, $); Python's $ also
// matches before a final newline. Internal to //worker/grammar.

#ifndef LLAMA_WORKER_GRAMMAR_REGEX_OVERLAP_H_
#define LLAMA_WORKER_GRAMMAR_REGEX_OVERLAP_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace llama::grammar::internal_grammar {

// Whether some string is both a whole match of `whole` (as RegexToGbnf and
// a "pattern" compiled by json_schema.h write it) and one in which some
// reader finds `search`: the product of their automata searched for a
// common string. An error where either does not parse (regex_parser.h) or
// the search outgrows its budget: then nothing is known.
absl::StatusOr<bool> WholeMatchMeetsSearch(absl::string_view whole, absl::string_view search);

// Whether every reader finds `pattern` in UTF-8 `text` (SurelyFinds), and
// whether some reader may (MayFind); an error where it does not parse.
absl::StatusOr<bool> SurelyFinds(absl::string_view pattern, absl::string_view text);
absl::StatusOr<bool> MayFind(absl::string_view pattern, absl::string_view text);

}  // namespace llama::grammar::internal_grammar

#endif  // LLAMA_WORKER_GRAMMAR_REGEX_OVERLAP_H_
