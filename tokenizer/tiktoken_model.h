// Llama 3's tokenizer model: tiktoken's byte-level BPE, as the reference
// (meta-llama/llama3, llama/tokenizer.py) builds it.
//
// The file ("tokenizer.model") has one line per base token: the token's
// bytes in base64, a space, its rank (ranks 0..N-1, each once). The 256
// special tokens follow the base tokens (ids N..N+255: <|begin_of_text|>,
// <|end_of_text|>, reserved ones, <|start_header_id|>, <|end_header_id|>,
// <|eot_id|>, ...). Encoding splits text with the reference's pre-tokenizer
// pattern (PCRE2, Unicode classes) and merges each piece's bytes
// lowest-rank pair first; special-token text in the input is ordinary text,
// as the reference's encode (disallowed_special=()) treats it.

#ifndef LLAMA_TOKENIZER_TIKTOKEN_MODEL_H_
#define LLAMA_TOKENIZER_TIKTOKEN_MODEL_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace llama::internal_tokenizer {

// The reference's pre-tokenizer pattern.
inline constexpr char kLlama3Pattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The reference's 256 special tokens, in id order after the base tokens.
// Llama 3.1 and later name some of the reserved ones (<|eom_id|>,
// <|python_tag|>, ...); the ids this tree gives a meaning to keep their names.
const std::vector<std::string>& Llama3SpecialTokens();

// Thread-safe after Parse.
class TiktokenModel {
 public:
  // True when `contents` looks like a ranks file (its first line is
  // "<base64> <number>"), as opposed to a SentencePiece model.
  static bool LooksLikeRanksFile(absl::string_view contents);

  // Errors name `source` and the line.
  static absl::StatusOr<std::unique_ptr<TiktokenModel>> Parse(absl::string_view contents, absl::string_view source);
  ~TiktokenModel();

  int num_base_tokens() const { return static_cast<int>(tokens_.size()); }
  int vocab_size() const { return num_base_tokens() + static_cast<int>(specials_.size()); }
  // The id of a special token ("<|eot_id|>"), or -1.
  int SpecialId(absl::string_view name) const;
  bool IsSpecial(int id) const { return id >= num_base_tokens(); }

  // Token ids of `text`, any bytes: invalid UTF-8 is first replaced by
  // U+FFFD (each maximal invalid subpart, as Python's and the WHATWG
  // decoders do). Inputs longer than 400,000 characters and runs of more
  // than 25,000 whitespace or non-whitespace characters are cut first, as
  // the reference cuts them.
  std::vector<int> Encode(absl::string_view text) const;

  // The bytes of a token (a special token's text). `id` must be in range.
  absl::string_view TokenBytes(int id) const;

  // The two tokens whose merge makes base token `id` (BPE over its bytes
  // with only lower ranks), as GGUF's merge list records it; an error for
  // single bytes, special tokens and ranks no merge produces.
  absl::StatusOr<std::pair<int, int>> MergeOf(int id) const;

 private:
  TiktokenModel() = default;
  void EncodeChunk(absl::string_view chunk, std::vector<int>* ids) const;
  // Merges only pairs of rank below `max_rank`.
  void BytePairEncode(absl::string_view piece, std::vector<int>* ids, int max_rank = INT32_MAX) const;

  std::vector<std::string> tokens_;  // By rank.
  absl::flat_hash_map<std::string, int> ranks_;
  std::vector<std::string> specials_;
  void* regex_ = nullptr;  // pcre2_code_8*, kept out of this header.
};

}  // namespace llama::internal_tokenizer

#endif  // LLAMA_TOKENIZER_TIKTOKEN_MODEL_H_
