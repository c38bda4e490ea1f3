// The tokenizer a GGUF file carries in its metadata (tokenizer.ggml.*),
// rebuilt as the tokenizer.model file we load: the inverse of
// checkpoint/gguf_llama.h's export, for llama.cpp's own files too.

#ifndef LLAMA_TOKENIZER_GGUF_VOCABULARY_H_
#define LLAMA_TOKENIZER_GGUF_VOCABULARY_H_

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace llama {

// For tokenizer.ggml.model "llama" a serialized SentencePiece ModelProto
// (tokens, scores, token types; BPE with byte fallback, Llama 2's
// normalizer settings unless tokenizer.ggml.add_space_prefix /
// remove_extra_whitespaces say otherwise); for "gpt2" with
// tokenizer.ggml.pre "llama-bpe" (Llama 3) a tiktoken ranks file (GPT-2's
// byte-to-unicode mapping undone, ranks the ids, checked against the
// merges; the 256 special tokens after the base ones must be Llama 3's).
// The result loads with Tokenizer::FromSerialized, and its BOS is
// tokenizer.ggml.bos_token_id and its EOS tokenizer.ggml.eos_token_id (for
// Llama 3 that may name <|eot_id|>, as llama.cpp writes Instruct models: a
// stop token of ours either way); an error otherwise. `metadata` is
// GgufFile::metadata(); `source` names the file in errors.
absl::StatusOr<std::string> TokenizerModelFromGguf(
    const std::vector<std::pair<std::string, nlohmann::json>>& metadata, absl::string_view source);

}  // namespace llama

#endif  // LLAMA_TOKENIZER_GGUF_VOCABULARY_H_
