// Pieces of GBNF text (the dialect grammar.h parses) for the converters
// that write grammars: JSON Schema (json_schema.h), regular expressions and
// choice lists (regex_to_gbnf.h). Each function returns one item that can be
// concatenated or repeated without further parentheses.

#ifndef LLAMA_WORKER_GRAMMAR_GBNF_WRITER_H_
#define LLAMA_WORKER_GRAMMAR_GBNF_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "worker/grammar/utf8_ranges.h"

namespace llama::grammar {

// Marks an unbounded maximum in GbnfRepeat.
inline constexpr int64_t kNoLimit = -1;

// A literal that matches `utf8` exactly. Everything outside printable ASCII
// is written as an escape, so the text stays one line and ASCII.
std::string GbnfLiteral(absl::string_view utf8);

// A literal for one code point.
std::string GbnfCodePointLiteral(uint32_t code_point);

// A character class matching exactly `ranges` (normalized, non-empty), or a
// literal when they are one character.
std::string GbnfClass(const std::vector<CodePointRange>& ranges);

// `item` repeated min to max times (max kNoLimit: unbounded). Written in
// the shortest form (? * + {m} {m,} {m,n}); `item` is parenthesized unless it
// is already one item. Repeating zero times gives the empty literal.
std::string GbnfRepeat(const std::string& item, int64_t min, int64_t max);

// `items` in sequence as one item: parenthesized when there are several.
std::string GbnfSequence(const std::vector<std::string>& items);

// `alternatives` as one item: parenthesized when there are several.
std::string GbnfAlternatives(const std::vector<std::string>& alternatives);

}  // namespace llama::grammar

#endif  // LLAMA_WORKER_GRAMMAR_GBNF_WRITER_H_
