// The regular expressions regex_to_gbnf.h compiles, parsed: ECMAScript
// syntax, the subset a context-free grammar can say. Internal to
// //worker/grammar.

#ifndef LLAMA_WORKER_GRAMMAR_REGEX_PARSER_H_
#define LLAMA_WORKER_GRAMMAR_REGEX_PARSER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/grammar/utf8_ranges.h"

namespace llama::grammar::internal_grammar {

// The parsed regex. A kSet node is one character from `set`; a kRepeat
// node has one child.
struct Node {
  enum Kind { kSet, kConcat, kAlternation, kRepeat };
  Kind kind = kConcat;
  std::vector<CodePointRange> set;  // Normalized (NormalizeRanges).
  std::vector<Node> children;
  int64_t min = 0, max = 0;
};

// A pattern is read by ECMAScript (what JSON Schema means) and by Python's
// re (what python-jsonschema checks with), which differ on \d \w \s and
// `.` past ASCII and control characters: the strings every reader matches
// (what a grammar may write), or those some reader might (what a check that
// a string is NOT matched must assume).
enum class RegexReaders { kEvery, kSome };

// The whole-string match `regex` describes, as `readers` take it;
// constructs the two read differently ({,n}, [^]) or one of them lacks (\c,
// \u{...}) are refused. Errors are InvalidArgument and name the construct
// and its offset.
absl::StatusOr<Node> ParseRegex(absl::string_view regex, RegexReaders readers = RegexReaders::kEvery);

// Characters (code points) in the shortest and the longest match; the
// longest is kNoLimit (gbnf_writer.h) when unbounded.
int64_t MinLength(const Node& node);
int64_t MaxLength(const Node& node);

}  // namespace llama::grammar::internal_grammar

#endif  // LLAMA_WORKER_GRAMMAR_REGEX_PARSER_H_
