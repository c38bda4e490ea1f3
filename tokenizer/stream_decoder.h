// Turns generated token ids into text as they arrive, for streaming output.
//
// Contract: the concatenation of everything Push() and Finish() return is
// exactly Tokenizer::Decode of all ids pushed, and no returned string ends
// in the middle of a UTF-8 character. Text is held back only while the
// trailing byte-fallback pieces form an incomplete (but still valid) UTF-8
// sequence, which a later token may complete.
//
// SentencePiece: cost per token is that of decoding the ids since the last
// "anchor" piece (a piece whose text survives SentencePiece's leading-space
// rule), so a long generation does not re-decode its whole history at every
// step. Byte-level (tiktoken) tokens: their bytes are concatenated, and only
// an incomplete last character is held back.

#ifndef LLAMA_TOKENIZER_STREAM_DECODER_H_
#define LLAMA_TOKENIZER_STREAM_DECODER_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "tokenizer/tokenizer.h"

namespace llama {

// Not thread-safe: one decoder per output stream. `tokenizer` must outlive it.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}

  // The ids already in the text before the first Push (a prompt the
  // answer continues): never returned, but they decide how the first ids
  // decode (a SentencePiece word-start space after text is kept, as a
  // decode of the whole sequence keeps it). Before any Push; ids must be in
  // the vocabulary.
  void Follow(absl::Span<const int> context);

  // Appends `id` and returns the text that became certain (maybe empty).
  absl::StatusOr<std::string> Push(int id);

  // Returns whatever is still held back (an incomplete byte sequence decodes
  // as replacement characters, as Decode does). Further Push calls continue
  // the same sequence.
  absl::StatusOr<std::string> Finish();

 private:
  // Number of trailing ids that are byte pieces forming an incomplete UTF-8
  // sequence that more bytes could still complete.
  size_t PendingByteCount() const;
  // Emits the decoded text of ids_[emitted_, end) and marks it emitted.
  absl::StatusOr<std::string> EmitUpTo(size_t end);

  const Tokenizer& tokenizer_;
  std::vector<int> ids_;
  size_t emitted_ = 0;  // ids_[0, emitted_) are fully returned.
  std::string pending_bytes_;  // Byte-level tokenizers: bytes not yet returned.
};

}  // namespace llama

#endif  // LLAMA_TOKENIZER_STREAM_DECODER_H_
