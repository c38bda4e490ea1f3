// The chat prompt formats, token for token as the references build them.
// Llama 3 (a tiktoken tokenizer): the llama3 reference's ChatFormat, see
// EncodeDialog. Llama 2 (SentencePiece), as Llama.chat_completion builds it:
//
//   [system, user_1, assistant_1, ..., user_n]
//   -> <s>[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user_1} [/INST] {assistant_1} </s>
//      ... <s>[INST] {user_n} [/INST]
//
// Each completed user/assistant pair is encoded as one string with BOS and
// EOS; the final user turn with BOS only. Contents are stripped as Python's
// str.strip() does (after the system prompt is folded into the first user
// message). A dialog that contains the special tags anywhere is still
// encoded, but flagged: its answer must be kUnsafeRequestAnswer.

#ifndef LLAMA_TOKENIZER_CHAT_FORMAT_H_
#define LLAMA_TOKENIZER_CHAT_FORMAT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tokenizer/tokenizer.h"

namespace llama {

enum class Role { kSystem, kUser, kAssistant };

struct Message {
  Role role;
  std::string content;
};

// The reference's Dialog.
using Dialog = std::vector<Message>;

// What the reference answers a dialog with special tags in it.
inline constexpr absl::string_view kUnsafeRequestAnswer =
    "Error: special tags are not allowed as part of the prompt.";

// "system", "user" or "assistant".
absl::string_view RoleName(Role role);
absl::StatusOr<Role> ParseRole(absl::string_view name);

// Python's str.strip() on UTF-8 text: removes leading and trailing
// characters for which str.isspace() is true (ASCII whitespace, \x1c-\x1f,
// U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F,
// U+3000).
absl::string_view StripPythonWhitespace(absl::string_view text);

// True if any message contains [INST], [/INST], <<SYS>> or <</SYS>>.
bool HasSpecialTags(const Dialog& dialog);

struct ChatPrompt {
  std::vector<int> tokens;
  // The dialog contained special tags: answer with kUnsafeRequestAnswer.
  bool unsafe = false;
};

// Llama 2: checks the roles (an optional leading system message, then user
// and assistant alternating, ending with user; errors name the message that
// breaks the rule) and encodes the dialog. Llama 3: <|begin_of_text|>, each
// message as <|start_header_id|>{role}<|end_header_id|>\n\n{content,
// stripped}<|eot_id|>, then the assistant's header; like the reference it
// takes any order of roles, and special tags are never "unsafe".
absl::StatusOr<ChatPrompt> EncodeDialog(const Tokenizer& tokenizer, const Dialog& dialog);

}  // namespace llama

#endif  // LLAMA_TOKENIZER_CHAT_FORMAT_H_
