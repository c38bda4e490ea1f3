// UTF-8 as the tokenizers need it: decoding one character with Unicode's
// well-formedness rules (table 3-7), replacing invalid bytes the way
// Python's and the WHATWG decoders do (one U+FFFD per maximal invalid
// subpart), and finding an incomplete character at the end of a stream.

#ifndef LLAMA_TOKENIZER_UTF8_H_
#define LLAMA_TOKENIZER_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/string_view.h"

namespace llama {

// The character at text[at]: its code point and length, or code point -1
// and the length of the maximal invalid subpart there (at least 1).
std::pair<int32_t, size_t> DecodeUtf8(absl::string_view text, size_t at);

// Python's str.isspace() for one code point (-1, an invalid byte: false):
// ASCII whitespace, \x1c-\x1f, U+0085, U+00A0, U+1680, U+2000-U+200A,
// U+2028, U+2029, U+202F, U+205F, U+3000.
bool IsPythonWhitespace(int32_t cp);

// `text` with each maximal invalid subpart replaced by U+FFFD.
std::string SanitizeUtf8(absl::string_view text);

// How many trailing bytes of `bytes` (0 to 3) are the well-formed start of
// a character that more bytes could complete.
size_t IncompleteUtf8Tail(absl::string_view bytes);

}  // namespace llama

#endif  // LLAMA_TOKENIZER_UTF8_H_
