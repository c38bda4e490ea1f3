// Trains the demo job's small SentencePiece tokenizer.
//
// A file of its own, free of Abseil, because SentencePiece's headers and
// Abseil's cannot share a translation unit (see third_party/README.md).

#ifndef LLAMA_LAUNCHER_DEMO_TOKENIZER_H_
#define LLAMA_LAUNCHER_DEMO_TOKENIZER_H_

#include <string>
#include <vector>

namespace llama::internal_demo {

// Trains a BPE model like Llama 2's (byte fallback, unk 0, BOS 1, EOS 2, no
// pad, digits split, whitespace kept) on `corpus` and writes it to
// `model_path`. Returns false and sets `error` on failure.
bool TrainTokenizer(const std::vector<std::string>& corpus, int vocab_size, const std::string& model_path,
                    std::string* error);

}  // namespace llama::internal_demo

#endif  // LLAMA_LAUNCHER_DEMO_TOKENIZER_H_
