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
// encoded, but flagged: its answer must be kUnsafeRequestAnswer. Llama 2
// has no tool-calling format: tools, tool calls and tool results are an
// error there.
//
// Llama 3.1's tool calling, as meta-llama/llama-models documents it
// (models/llama3_1/prompt_format.md, "Builtin Tool Calling" and "JSON based
// tool calling"; models/llama3/chat_format.py):
//
//   <|start_header_id|>system<|end_header_id|>\n\n
//   Environment: ipython\n
//   Tools: brave_search, wolfram_alpha\n      (the built-in tools; else an empty line)
//   Cutting Knowledge Date: December 2023\n
//   Today Date: 21 September 2024\n
//   \n{system}\n                              (when the dialog has one)
//   <|eot_id|><|start_header_id|>user<|end_header_id|>\n\n
//   Answer the user's question by making use of the following functions if needed.\n
//   If none of the function can be used, please say so.\n
//   Here is a list of functions in JSON format:\n
//   {definition}\n ...                         (one per function)
//   \nReturn function calls in JSON format.<|eot_id|>
//   ... the dialog ...
//
// A tool call in the dialog is written as the model writes it, after
// <|python_tag|> and ending the message with <|eom_id|>: a function's as
// {"name": ..., "parameters": ...}, brave_search's and wolfram_alpha's as
// brave_search.call(query="..."), code_interpreter's as its code. A tool's
// result is an "ipython" message.

#ifndef LLAMA_TOKENIZER_CHAT_FORMAT_H_
#define LLAMA_TOKENIZER_CHAT_FORMAT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tokenizer/tokenizer.h"

namespace llama {

// kTool is a tool's result (OpenAI's "tool" role; Llama 3.1's "ipython").
enum class Role { kSystem, kUser, kAssistant, kTool };

// A call the model made (OpenAI's tool_calls[i]): `arguments` is the JSON
// text of the function's arguments. The id matters to the client only: the
// Llama 3.1 format pairs a result with the call before it.
struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;
};

struct Message {
  Role role;
  std::string content;
  // An assistant message's calls. (The initializer lets {role, content}
  // build a Message without -Wmissing-field-initializers.)
  std::vector<ToolCall> tool_calls = {};
};

// The reference's Dialog.
using Dialog = std::vector<Message>;

// What the reference answers a dialog with special tags in it.
inline constexpr absl::string_view kUnsafeRequestAnswer =
    "Error: special tags are not allowed as part of the prompt.";

// "system", "user", "assistant" or "tool".
absl::string_view RoleName(Role role);
// One of the roles of a dialog file: "system", "user" or "assistant" (tool
// results need the tool calls, which dialog files do not hold).
absl::StatusOr<Role> ParseRole(absl::string_view name);

// Llama 3.1's built-in tools, by the names the model knows them by.
inline constexpr absl::string_view kBuiltinTools[] = {"brave_search", "wolfram_alpha", "code_interpreter"};
bool IsBuiltinTool(absl::string_view name);

// The tools a Llama 3.1 prompt offers (see the top of this file).
struct ToolPrompt {
  std::vector<std::string> builtin_tools;         // Among kBuiltinTools, in the client's order.
  std::vector<std::string> function_definitions;  // JSON texts, shown as they are.
  std::string today;                              // "21 September 2024".

  bool empty() const { return builtin_tools.empty() && function_definitions.empty(); }
};

// Llama 3.1's special tokens by their Llama 3.1 names. Llama 3's tokenizer
// names the same ids <|reserved_special_token_4|> (<|eom_id|>) and
// <|reserved_special_token_5|> (<|python_tag|>): both names are looked up.
int Llama31SpecialId(const Tokenizer& tokenizer, absl::string_view name);

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
// takes any order of roles, and special tags are never "unsafe". With
// `tools` (Llama 3 only), the dialog's system message is folded into the
// tool prompt's system turn.
absl::StatusOr<ChatPrompt> EncodeDialog(const Tokenizer& tokenizer, const Dialog& dialog);
absl::StatusOr<ChatPrompt> EncodeDialog(const Tokenizer& tokenizer, const Dialog& dialog, const ToolPrompt& tools);

}  // namespace llama

#endif  // LLAMA_TOKENIZER_CHAT_FORMAT_H_
