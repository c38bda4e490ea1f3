// Regular expressions and choice lists as GBNF grammars (grammar.h), for
// vLLM's guided_regex and guided_choice and JSON Schema's "pattern".
//
// The regex syntax is ECMAScript's (what JSON Schema and the OpenAI-style
// APIs use) without flags, and the match is of the whole text: a leading ^
// and a trailing $ change nothing. Supported: literals and escapes
// (\t \n \r \f \v \0 \xHH \uHHHH \u{H...} \cX and escaped punctuation), .
// (any character but a line terminator), classes [...] [^...] with ranges,
// \d \w \s \D \W \S, groups ( ) (?: ) (?<name> ), alternation |, and the
// quantifiers * + ? {m} {m,} {m,n}, greedy or lazy (a lazy quantifier
// matches the same strings). Refused, with an error naming the construct:
// backreferences, lookahead and lookbehind, \b \B and ^ $ anywhere but the
// ends, Unicode properties, and repeating without bound what can be empty
// (a grammar cannot say (a*)* without looping).
//
// Where ECMAScript and Python's re (which python-jsonschema checks patterns
// with) disagree, on \d \w \s and their negations, and . (Python's also
// takes \r), the grammar takes only what both match (regex_parser.cc).

#ifndef LLAMA_WORKER_GRAMMAR_REGEX_TO_GBNF_H_
#define LLAMA_WORKER_GRAMMAR_REGEX_TO_GBNF_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/grammar/gbnf_writer.h"

namespace llama::grammar {

// A grammar (start rule `root`) whose sentences are the strings `regex`
// matches as a whole. Errors are InvalidArgument and say what and where.
absl::StatusOr<std::string> RegexToGbnf(absl::string_view regex);

// A grammar whose sentences are exactly `choices` (UTF-8). The caller
// refuses an empty list: no grammar text says "nothing".
std::string ChoiceGbnf(const std::vector<std::string>& choices);

namespace internal_grammar {

// How matched characters appear in the text the grammar reads.
enum class RegexTarget {
  kText,        // As themselves.
  kJsonString,  // Inside a JSON string literal: " \ and control characters escaped.
};

struct RegexExpression {
  std::string gbnf;        // One GBNF item (it can be repeated or concatenated as is).
  int64_t min_length = 0;  // Characters (code points) in the shortest match.
  int64_t max_length = 0;  // ... in the longest; kNoLimit if unbounded.
};

// The body of a rule matching what `regex` matches, for embedding in a
// larger grammar (json_schema.cc uses it for "pattern" and "format"). With
// a `max_length` that some matches exceed, the matches of at most that many
// characters where each repetition repeats at most as many times beyond its
// minimum as keeps every match within it (a subset: [a-z]+ with 8 is
// [a-z]{1,8}); when even its minimal repetitions are longer, as without it.
absl::StatusOr<RegexExpression> RegexToGbnfExpression(absl::string_view regex, RegexTarget target,
                                                      int64_t max_length = kNoLimit);

}  // namespace internal_grammar
}  // namespace llama::grammar

#endif  // LLAMA_WORKER_GRAMMAR_REGEX_TO_GBNF_H_
