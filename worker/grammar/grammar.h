// Grammars for structured output: a context-free grammar over bytes,
// written in GBNF as llama.cpp's grammars/README.md defines it, which
// JSON Schema, regular expressions and choice lists compile into
// (json_schema.h, regex_to_gbnf.h) and which a TokenMatcher
// (token_matcher.h) turns into the set of tokens allowed next.
//
// Written here rather than taken from a library: Debian packages no
// grammar-constrained decoding library (xgrammar, llguidance and outlines
// are not in Debian), and llama.cpp's parser works on code points and
// re-walks the grammar for every token, the cost we avoid.
//
// GBNF terminals match Unicode code points; a compiled Grammar matches
// their UTF-8 bytes, because tokens are byte strings that may end inside
// a character. A character class becomes a rule whose alternatives are
// byte-range sequences (the UTF-8 range split of RE2 and regex-automata);
// a repetition becomes a right-recursive rule.
//
// The compiled form: each alternative of each rule is a run of elements
// (a byte set or a rule reference) closed by an end marker, all in one
// array, so a parser position is one integer (byte_parser.h).

#ifndef LLAMA_WORKER_GRAMMAR_GRAMMAR_H_
#define LLAMA_WORKER_GRAMMAR_GRAMMAR_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace llama::grammar {

// A set of byte values.
class ByteSet {
 public:
  void Add(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) bits_[b >> 6] |= uint64_t{1} << (b & 63);
  }
  bool Has(uint8_t b) const { return (bits_[b >> 6] >> (b & 63)) & 1; }
  bool operator==(const ByteSet& other) const { return bits_ == other.bits_; }

 private:
  std::array<uint64_t, 4> bits_{};
};

struct Element {
  enum Kind : uint8_t { kEnd, kBytes, kRule };
  Kind kind = kEnd;
  int32_t value = 0;  // kBytes: a byte set's index; kRule: a rule's.
};

class Grammar {
 public:
  // Parses GBNF text; the start rule is `root`. Errors say where (line and
  // column) and what was expected; undefined, doubly defined and
  // left-recursive rules are errors naming the rule.
  static absl::StatusOr<std::shared_ptr<const Grammar>> Parse(absl::string_view gbnf);

  // The whole of `text` is a sentence of the grammar.
  bool Accepts(absl::string_view text) const;

  int root() const { return root_; }
  int rules() const { return static_cast<int>(rule_starts_.size()); }
  // Positions in elements() where rule r's alternatives start.
  const std::vector<int32_t>& alternatives(int r) const { return rule_starts_[r]; }
  const Element& element(int32_t position) const { return elements_[position]; }
  const ByteSet& byte_set(int32_t index) const { return byte_sets_[index]; }

 private:
  friend class GbnfCompiler;
  Grammar() = default;

  int root_ = 0;
  std::vector<Element> elements_;
  std::vector<std::vector<int32_t>> rule_starts_;
  std::vector<ByteSet> byte_sets_;
};

}  // namespace llama::grammar

#endif  // LLAMA_WORKER_GRAMMAR_GRAMMAR_H_
