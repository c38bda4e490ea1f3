// Each token of a sequence as Decode spells it there, for reports token by
// token (OpenAI's logprobs, whose tokens must join to the text): the
// spellings of a sequence's tokens concatenate to Decode's text before
// invalid UTF-8 is replaced, so a character split over tokens is split
// between their spellings.
//
// A tiktoken token is its bytes wherever it stands. A SentencePiece piece
// is its text with the whitespace marker as a space, a byte piece its byte,
// a control piece nothing; the one context is the text's first piece after
// control pieces, whose leading space Decode drops (the dummy prefix).

#ifndef LLAMA_TOKENIZER_TOKEN_SPELLER_H_
#define LLAMA_TOKENIZER_TOKEN_SPELLER_H_

#include <string>

#include "tokenizer/tokenizer.h"

namespace llama {

// Not thread-safe: one per sequence. `tokenizer` must outlive it.
class TokenSpeller {
 public:
  explicit TokenSpeller(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}

  // `id`'s bytes after the tokens appended so far (also for a token that
  // could stand there instead: an alternative). `id` must be in
  // [0, vocab_size()).
  std::string Spell(int id) const;
  // Appends `id` to the sequence.
  void Append(int id);

 private:
  const Tokenizer& tokenizer_;
  bool text_started_ = false;  // A piece other than control pieces came.
};

}  // namespace llama

#endif  // LLAMA_TOKENIZER_TOKEN_SPELLER_H_
