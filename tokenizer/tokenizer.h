// The tokenizer of a Llama model, with the reference's API: Llama 2's
// SentencePiece model or Llama 3's tiktoken BPE (tiktoken_model.h, also read
// from Hugging Face's tokenizer.json: tokenizer_json.h), told apart by the
// file's contents.
//
// Mirrors llama/tokenizer.py: vocabulary size, BOS/EOS/pad ids, and
// Encode(text, bos, eos) / Decode(ids). The pad id is -1: it is never a
// valid token id, and Decode rejects it like any out-of-range id.

#ifndef LLAMA_TOKENIZER_TOKENIZER_H_
#define LLAMA_TOKENIZER_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace llama {

namespace internal_tokenizer {
class SentencePieceModel;
class TiktokenModel;
}  // namespace internal_tokenizer

// Thread-safe: every method is const and may be called from many threads.
class Tokenizer {
 public:
  enum class Family {
    kSentencePiece,  // Llama 2.
    kTiktoken,       // Llama 3: byte-level BPE with header-based chat.
  };

  // Loads a `tokenizer.model` file (or a Llama 3 `tokenizer.json`). A
  // missing, empty or unparsable file is an error naming `path`.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Load(const std::string& path);

  // Parses a file's contents (a serialized SentencePiece ModelProto, a
  // tiktoken ranks file or a Llama 3 tokenizer.json); `source` names it in
  // errors.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromSerialized(absl::string_view serialized,
                                                                   absl::string_view source);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  int vocab_size() const { return vocab_size_; }
  int bos_id() const { return bos_id_; }
  int eos_id() const { return eos_id_; }
  int pad_id() const { return pad_id_; }
  Family family() const { return tiktoken_ != nullptr ? Family::kTiktoken : Family::kSentencePiece; }
  // Tokens that end a generation: EOS, and Llama 3's <|eot_id|>.
  const std::vector<int>& stop_ids() const { return stop_ids_; }
  // A special token's id ("<|eot_id|>"), or -1 (SentencePiece: none).
  int SpecialId(absl::string_view name) const;
  // Tiktoken: the two tokens whose merge makes base token `id` (for GGUF's
  // merge list); an error for bytes, specials and SentencePiece.
  absl::StatusOr<std::pair<int, int>> BpeMerge(int id) const;

  // A vocabulary entry as the model file holds it, for exporting the
  // tokenizer into other formats (GGUF).
  enum class PieceKind { kNormal, kUnknown, kControl, kByte, kUnused };
  struct Piece {
    std::string text;  // With SentencePiece's whitespace marker U+2581.
    float score;
    PieceKind kind;
  };
  // `id` must be in [0, vocab_size()).
  Piece GetPiece(int id) const;
  int unk_id() const;

  // The reference's encode: SentencePiece ids, BOS prepended and EOS
  // appended when asked.
  absl::StatusOr<std::vector<int>> Encode(absl::string_view text, bool bos, bool eos) const;

  // The reference's decode. Every id must be in [0, vocab_size()).
  absl::StatusOr<std::string> Decode(absl::Span<const int> ids) const;

  // The byte a byte-fallback piece (<0xNN>) stands for, or -1 for any other
  // piece. `id` must be in range. (SentencePiece.)
  int ByteValue(int id) const { return byte_value_[id]; }

  // A byte-level (tiktoken) token's bytes, a special token's text. `id`
  // must be in range; empty for SentencePiece.
  absl::string_view TokenBytes(int id) const;

  // True for an ordinary piece whose text contains something other than the
  // whitespace marker: decoding never strips it to nothing, so text after it
  // decodes the same whatever came before (StreamDecoder relies on this).
  bool IsTextAnchor(int id) const { return text_anchor_[id] != 0; }

 private:
  explicit Tokenizer(std::unique_ptr<internal_tokenizer::SentencePieceModel> model);
  explicit Tokenizer(std::unique_ptr<internal_tokenizer::TiktokenModel> model);
  absl::Status CheckIds(absl::Span<const int> ids) const;

  // One of the two is set.
  std::unique_ptr<internal_tokenizer::SentencePieceModel> model_;
  std::unique_ptr<internal_tokenizer::TiktokenModel> tiktoken_;
  std::vector<int> stop_ids_;
  int vocab_size_;
  int bos_id_;
  int eos_id_;
  int pad_id_;
  std::vector<int16_t> byte_value_;
  std::vector<uint8_t> text_anchor_;
};

// OK when `a` and `b` are the same vocabulary: the same family, size,
// BOS and EOS, and every token the same text and kind (SentencePiece: and
// score). Else FailedPrecondition saying the first difference, e.g. that
// token 42 is "foo" in `a` and "bar" in `b`. A draft model must speak its
// model's tokenizer: the same size alone would let another vocabulary
// through, whose ids mean other text.
absl::Status CheckSameVocabulary(const Tokenizer& a, const Tokenizer& b);

}  // namespace llama

#endif  // LLAMA_TOKENIZER_TOKENIZER_H_
