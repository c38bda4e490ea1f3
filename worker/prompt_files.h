// Reading the prompts and dialogs users write into files.
//
// Prompts file: either a JSON array of strings, or JSON Lines where each
// non-blank line is a JSON string or an object {"prompt": "..."}.
// Dialogs file: a JSON array of dialogs, each an array of
// {"role": "system" | "user" | "assistant", "content": "..."} (the
// reference's Dialog). Errors name the file and the line, or the dialog and
// message index, and the field.

#ifndef LLAMA_WORKER_PROMPT_FILES_H_
#define LLAMA_WORKER_PROMPT_FILES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tokenizer/chat_format.h"

namespace llama {

absl::StatusOr<std::vector<std::string>> ReadPromptsFile(const std::string& path);
absl::StatusOr<std::vector<Dialog>> ReadDialogsFile(const std::string& path);

// The same, from text already in memory; `source` names it in errors.
absl::StatusOr<std::vector<std::string>> ParsePrompts(absl::string_view text,
                                                      absl::string_view source);
absl::StatusOr<std::vector<Dialog>> ParseDialogs(absl::string_view text, absl::string_view source);

}  // namespace llama

#endif  // LLAMA_WORKER_PROMPT_FILES_H_
