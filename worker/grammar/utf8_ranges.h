// Unicode code point ranges as UTF-8 byte-range sequences, the split that
// RE2 and Rust's regex-automata use: every code point of a range is the
// byte string of exactly one sequence, and each sequence is a product of
// byte ranges, so a byte-level automaton matches characters exactly.

#ifndef LLAMA_WORKER_GRAMMAR_UTF8_RANGES_H_
#define LLAMA_WORKER_GRAMMAR_UTF8_RANGES_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace llama::grammar {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

struct CodePointRange {
  uint32_t lo = 0;
  uint32_t hi = 0;  // Inclusive.

  bool operator==(const CodePointRange& o) const { return lo == o.lo && hi == o.hi; }
  template <typename H>
  friend H AbslHashValue(H h, const CodePointRange& r) {
    return H::combine(std::move(h), r.lo, r.hi);
  }
};

// Sorted, merged, complemented over [0, kMaxCodePoint] when `negated`, and
// without the surrogates (U+D800-U+DFFF), which UTF-8 cannot encode.
std::vector<CodePointRange> NormalizeRanges(std::vector<CodePointRange> ranges, bool negated);

// One to four inclusive byte ranges, one per byte of the encoding.
using Utf8Sequence = std::vector<std::pair<uint8_t, uint8_t>>;

// The sequences whose byte strings are exactly the encodings of `ranges`
// (normalized, as NormalizeRanges gives them).
std::vector<Utf8Sequence> Utf8Sequences(const std::vector<CodePointRange>& ranges);

// UTF-8 of a scalar value into out[0, n); returns n.
int EncodeUtf8(uint32_t code_point, char out[4]);

// The code point `text` starts with and its length in bytes; 0 for an
// invalid or truncated encoding (overlong forms and surrogates included).
int DecodeUtf8(absl::string_view text, uint32_t& code_point);

}  // namespace llama::grammar

#endif  // LLAMA_WORKER_GRAMMAR_UTF8_RANGES_H_
