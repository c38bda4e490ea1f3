// Byte-level BPE vocabularies as GPT-2 introduced them and Hugging Face's
// tokenizers library and llama.cpp's "gpt2" GGUF tokenizer keep them: every
// token's bytes written as printable characters (GPT-2's byte-to-unicode
// mapping), merges as pairs of such strings. This file holds that mapping
// (the one place in the tree) and the conversion of such a vocabulary into
// Llama 3's tiktoken ranks file (tiktoken_model.h), the form we load.

#ifndef LLAMA_TOKENIZER_BYTE_LEVEL_BPE_H_
#define LLAMA_TOKENIZER_BYTE_LEVEL_BPE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace llama {

// `bytes` in GPT-2's characters: printable Latin-1 bytes stand for
// themselves, the other 68 bytes for U+0100 and up, in byte order.
std::string ByteLevelText(absl::string_view bytes);

// The inverse: the bytes `text` stands for. `where` (a file and key) names
// the text in the error when a character is not one of the 256.
absl::StatusOr<std::string> ByteLevelBytes(absl::string_view text, absl::string_view where);

// A Llama 3 vocabulary in byte-level form. Ids are tiktoken's ranks: base
// token i has rank i, and the 256 special tokens follow them.
struct ByteLevelVocabulary {
  std::vector<std::string> tokens;                          // Base tokens by id, in GPT-2's characters.
  std::vector<std::pair<std::string, std::string>> merges;  // In priority order, in GPT-2's characters.
  std::vector<std::string> specials;                        // By id, after the base tokens.
  // Where each list came from ("tokenizer.ggml.tokens"), for errors.
  std::string tokens_key;
  std::string merges_key;
  std::string specials_key;
};

// The tiktoken ranks file ("<base64 bytes> <rank>" lines) of `vocabulary`.
// Tiktoken merges the pair whose result has the lowest rank, a BPE model
// the pair listed first; the two agree when every merge makes a token
// ranked above its parts and results never go down the list, so both are
// checked. The specials must be Llama 3's (or 3.1's names for the same
// ids), as TiktokenModel numbers them. Errors name `source` and the key.
absl::StatusOr<std::string> TiktokenRanksFile(const ByteLevelVocabulary& vocabulary, absl::string_view source);

}  // namespace llama

#endif  // LLAMA_TOKENIZER_BYTE_LEVEL_BPE_H_
