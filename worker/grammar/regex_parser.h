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

// The whole-string match `regex` describes; errors are InvalidArgument
// and name the construct and its offset.
absl::StatusOr<Node> ParseRegex(absl::string_view regex);

// Characters (code points) in the shortest and the longest match; the
// longest is kNoLimit (gbnf_writer.h) when unbounded.
int64_t MinLength(const Node& node);
int64_t MaxLength(const Node& node);

}  // namespace llama::grammar::internal_grammar

#endif  // LLAMA_WORKER_GRAMMAR_REGEX_PARSER_H_
