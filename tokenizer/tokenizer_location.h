// Where a checkpoint folder's tokenizer is when no flag names it, for the
// launcher and tools/convert alike.

#ifndef LLAMA_TOKENIZER_TOKENIZER_LOCATION_H_
#define LLAMA_TOKENIZER_TOKENIZER_LOCATION_H_

#include <string>

#include "absl/status/statusor.h"

namespace llama {

// Meta's tokenizer.model in `ckpt_dir` (Llama 3's download.sh, a Hugging
// Face Llama 2 repository), beside it (Llama 2's download.sh, one for every
// size) or in its original/ (a Hugging Face Llama 3 repository), the first
// found in that order; else Hugging Face's tokenizer.json in `ckpt_dir`
// (Tokenizer::Load reads Llama 3's). NotFound, saying to pass
// --tokenizer_path, when there is none.
absl::StatusOr<std::string> FindTokenizerFile(const std::string& ckpt_dir);

}  // namespace llama

#endif  // LLAMA_TOKENIZER_TOKENIZER_LOCATION_H_
