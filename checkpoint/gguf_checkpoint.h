// A checkpoint that is one GGUF file, for the launcher: finding it, and the
// tokenizer and chat format its metadata carries (the weights convert like
// any checkpoint's, converter.h).

#ifndef LLAMA_CHECKPOINT_GGUF_CHECKPOINT_H_
#define LLAMA_CHECKPOINT_GGUF_CHECKPOINT_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tokenizer/chat_template.h"

namespace llama {

// `ckpt_dir` itself when it is a .gguf file; the one .gguf file of a folder
// that holds no other checkpoint (Meta's, Hugging Face's, our shards);
// else nullopt.
std::optional<std::string> GgufCheckpointFile(const std::string& ckpt_dir);

// The file's tokenizer (tokenizer.ggml.*) written as the tokenizer.model
// file `out_path` (tokenizer/gguf_vocabulary.h), replacing it whole:
// launchers writing it at once write the same bytes.
absl::Status WriteGgufTokenizer(const std::string& gguf, const std::string& out_path);

// The chat format tokenizer.chat_template names (RecognizeChatTemplate),
// nullopt when the file has none (a base model).
absl::StatusOr<std::optional<ChatTemplateKind>> GgufChatTemplate(const std::string& gguf);

}  // namespace llama

#endif  // LLAMA_CHECKPOINT_GGUF_CHECKPOINT_H_
