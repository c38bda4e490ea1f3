// Chat's tools through the OpenAI API, in Llama 3.1's tool-calling format
// (chat_format.h has the prompt): the tools a request offers and how it
// lets the model use them, the prompt's view of them, the grammar that
// forces a call (tool_choice "required" or a named function), and the
// model's answer read back as a call, whole or while it streams.
//
// A call is what Llama 3.1 writes after <|python_tag|> (the tag itself is
// optional, as it is for the reference's parser):
//   {"name": "get_weather", "parameters": {"city": "Paris"}}  (a function;
//       "arguments" is taken for "parameters", and "type": "function" may lead)
//   brave_search.call(query="...")                            (a built-in tool)
//   any code                                                  (code_interpreter,
//       after <|python_tag|> only)
// One call per answer, as the format has it; an answer that is not a call
// of an offered tool is text.

#ifndef LLAMA_WORKER_SERVE_TOOL_CALLS_H_
#define LLAMA_WORKER_SERVE_TOOL_CALLS_H_

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tokenizer/chat_format.h"

namespace llama {

// OpenAI's tools[i].function.
struct FunctionTool {
  std::string name;
  std::string description;
  nlohmann::ordered_json parameters;  // A JSON Schema, in the client's key order; null: none given.
};

enum class ToolChoice { kNone, kAuto, kRequired, kNamed };

struct ToolUse {
  std::vector<FunctionTool> tools;
  ToolChoice choice = ToolChoice::kAuto;
  std::string named;  // kNamed: the function's name.

  // The model may call a tool: its answers are read for calls.
  bool active() const { return !tools.empty() && choice != ToolChoice::kNone; }
  const FunctionTool* Find(absl::string_view name) const;
};

// A function as the prompt lists it: {"type": "function", "function":
// {"name", "description", "parameters"}} with the documented prompt's
// layout (4-space indents; arrays of plain values on one line).
std::string FunctionDefinition(const FunctionTool& tool);

// The prompt's view of `use`; `today` as "21 September 2024". With
// tool_choice "none" too, as vLLM does: the tools stay the context of the
// calls and results in the dialog; only no call is read from the answer.
ToolPrompt MakeToolPrompt(const ToolUse& use, absl::string_view today);

// Today's date (UTC) as the Llama 3.1 prompt writes it.
std::string LlamaPromptDate();

// The grammar of the calls `use` forces: {"name": ..., "parameters": ...}
// for each tool allowed (the named one, or all), its parameters held to the
// tool's schema (a built-in tool without one: its one string argument,
// "query" or "code"). A schema the converter refuses is an InvalidArgument
// error; `param` is then set to the field that holds it.
absl::StatusOr<std::string> ForcedCallGbnf(const ToolUse& use, std::string* param);

// `text` (an answer) as a call of one of `use`'s tools, or nullopt. The id
// is left empty.
std::optional<ToolCall> ParseToolCall(const ToolUse& use, absl::string_view text);

// Text the model wrote as <|eom_id|> (under either of its names) when it
// ends `text`: the token stops the answer, its text is not the answer's.
absl::string_view StripEndOfMessage(absl::string_view text);

// One streamed choice with tools: its text passes until it looks like the
// start of a call; from there it is held back, and at the end it is a call
// (sent whole, in one delta) or, if it did not parse as one, the text.
class ToolCallStream {
 public:
  explicit ToolCallStream(const ToolUse* use) : use_(use) {}

  // The part of `text` (the answer's next piece) to send now.
  std::string Push(absl::string_view text);
  // At the end of the answer: the call, if the text held back is one, and
  // that text in `rest` (to send when no call is).
  std::optional<ToolCall> Finish(std::string* rest);

 private:
  const ToolUse* use_;
  std::string held_;
  bool passing_ = false;  // It is text: nothing more is held.
};

}  // namespace llama

#endif  // LLAMA_WORKER_SERVE_TOOL_CALLS_H_
