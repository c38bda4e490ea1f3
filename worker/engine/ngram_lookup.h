// Speculative decoding's cheapest draft: n-gram lookup in the sequence
// itself (vLLM's "prompt lookup", llama.cpp's llama-lookup, TGI's n-gram
// speculation). The tokens that followed the latest earlier occurrence of
// the sequence's last few tokens are proposed as what comes next: answers
// that copy their input (code edits, extraction, quoting a retrieved
// passage) or fall into a loop are guessed many tokens at a time, at no
// model cost. The engine verifies every guess with the target model in
// the step that feeds the text's last token, so a wrong one costs a row of
// that step and changes nothing else.

#ifndef LLAMA_WORKER_ENGINE_NGRAM_LOOKUP_H_
#define LLAMA_WORKER_ENGINE_NGRAM_LOOKUP_H_

#include <vector>

#include "absl/types/span.h"

namespace llama {

// Suffix lengths tried, longest first: a longer match is a better guess,
// and one token is tried last (llama.cpp's lookup goes as low; the engine's
// record of how often a request's guesses hold weeds out bad ones).
inline constexpr int kNgramLookupMax = 4;
inline constexpr int kNgramLookupMin = 1;

// Up to `max_tokens` proposals for what follows `tokens`, into `out`
// (replaced; empty when no suffix of kNgramLookupMax down to
// kNgramLookupMin tokens occurred before). What followed the match is read
// on past the end of `tokens` into the proposals themselves, so a loop
// shorter than max_tokens is proposed whole (x y x y -> x y x y ...).
void NgramLookup(absl::Span<const int> tokens, int max_tokens, std::vector<int>& out);

}  // namespace llama

#endif  // LLAMA_WORKER_ENGINE_NGRAM_LOOKUP_H_
