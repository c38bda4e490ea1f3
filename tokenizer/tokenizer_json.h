// Hugging Face's tokenizer.json (the `tokenizers` library's serialization)
// for Llama 3: a byte-level BPE model (model.vocab in GPT-2's characters,
// model.merges as "a b" strings or [a, b] pairs) behind Llama 3's
// pre-tokenizer (Split on the reference's pattern, then ByteLevel), its 256
// special tokens in added_tokens. We read it by turning it into the tiktoken
// ranks file it was made from (byte_level_bpe.h). Other models, such as
// Llama 2's SentencePiece-style tokenizer.json (Metaspace, byte fallback),
// are refused with a pointer to their tokenizer.model.

#ifndef LLAMA_TOKENIZER_TOKENIZER_JSON_H_
#define LLAMA_TOKENIZER_TOKENIZER_JSON_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace llama {

// True when `contents` is JSON rather than a ranks file or a SentencePiece
// model: its first non-blank byte is '{' (neither of those can start so).
bool LooksLikeTokenizerJson(absl::string_view contents);

// The tiktoken ranks file of a Llama 3 tokenizer.json. Errors name `source`
// and the key, and say what was expected.
absl::StatusOr<std::string> TiktokenRanksFromTokenizerJson(absl::string_view contents, absl::string_view source);

}  // namespace llama

#endif  // LLAMA_TOKENIZER_TOKENIZER_JSON_H_
