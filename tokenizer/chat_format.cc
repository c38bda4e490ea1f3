#include "tokenizer/chat_format.h"

#include <algorithm>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/named_values.h"
#include "base/status_macros.h"
#include "tokenizer/utf8.h"

namespace llama {
namespace {

constexpr absl::string_view kBeginInst = "[INST]";
constexpr absl::string_view kEndInst = "[/INST]";
constexpr absl::string_view kBeginSys = "<<SYS>>\n";
constexpr absl::string_view kEndSys = "\n<</SYS>>\n\n";
constexpr absl::string_view kSpecialTags[] = {"[INST]", "[/INST]", "<<SYS>>", "<</SYS>>"};
constexpr NamedValues<Role, 3> kRoleNames({
    {"system", Role::kSystem},
    {"user", Role::kUser},
    {"assistant", Role::kAssistant},
});

absl::Status RoleError(const Dialog& dialog, size_t index, absl::string_view expected) {
  return absl::InvalidArgumentError(absl::StrFormat(
      "dialog message %d has role \"%s\"; expected %s (an optional system message first, then "
      "user and assistant alternating, ending with user)",
      index, RoleName(dialog[index].role), expected));
}

}  // namespace

absl::string_view RoleName(Role role) { return role == Role::kTool ? "tool" : kRoleNames.Name(role); }

absl::StatusOr<Role> ParseRole(absl::string_view name) { return kRoleNames.Parse("role", name); }

absl::string_view StripPythonWhitespace(absl::string_view text) {
  size_t begin = text.size(), end = 0;  // First and past-the-last non-space character.
  for (size_t at = 0; at < text.size();) {
    const auto [cp, length] = DecodeUtf8(text, at);
    if (!IsPythonWhitespace(cp)) {
      begin = std::min(begin, at);
      end = at + length;
    }
    at += length;
  }
  return begin < end ? text.substr(begin, end - begin) : absl::string_view();
}

bool HasSpecialTags(const Dialog& dialog) {
  for (const Message& message : dialog) {
    for (absl::string_view tag : kSpecialTags) {
      if (absl::StrContains(message.content, tag)) return true;
    }
  }
  return false;
}

int Llama31SpecialId(const Tokenizer& tokenizer, absl::string_view name) {
  const int id = tokenizer.SpecialId(name);
  if (id >= 0) return id;
  if (name == "<|eom_id|>") return tokenizer.SpecialId("<|reserved_special_token_4|>");
  if (name == "<|python_tag|>") return tokenizer.SpecialId("<|reserved_special_token_5|>");
  return -1;
}

bool IsBuiltinTool(absl::string_view name) {
  return std::find(std::begin(kBuiltinTools), std::end(kBuiltinTools), name) != std::end(kBuiltinTools);
}

namespace {

// The text of the tool prompt's system turn (see chat_format.h).
std::string ToolSystemText(const ToolPrompt& tools, const Message* system) {
  std::vector<std::string> named;  // code_interpreter is implied by the environment.
  for (const std::string& tool : tools.builtin_tools) {
    if (tool != "code_interpreter") named.push_back(tool);
  }
  std::string text = "Environment: ipython\n";
  absl::StrAppend(&text, named.empty() ? "" : absl::StrCat("Tools: ", absl::StrJoin(named, ", ")), "\n",
                  "Cutting Knowledge Date: December 2023\nToday Date: ", tools.today, "\n");
  if (system != nullptr) absl::StrAppend(&text, "\n", StripPythonWhitespace(system->content), "\n");
  return text;
}

std::string ToolDefinitionsText(const ToolPrompt& tools) {
  std::string text =
      "Answer the user's question by making use of the following functions if needed.\n"
      "If none of the function can be used, please say so.\n"
      "Here is a list of functions in JSON format:\n";
  for (const std::string& definition : tools.function_definitions) absl::StrAppend(&text, definition, "\n");
  return absl::StrCat(text, "\nReturn function calls in JSON format.");
}

// A call as the model writes it after <|python_tag|> (the reference's
// ToolUtils.encode_tool_call; a function's in the JSON form this server's
// forced calls take). A built-in tool's arguments hold its one argument:
// {"query": ...}, or code_interpreter's {"code": ...}.
absl::StatusOr<std::string> CallText(const ToolCall& call) {
  if (!IsBuiltinTool(call.name)) {
    return absl::StrCat("{\"name\": \"", call.name, "\", \"parameters\": ", call.arguments, "}");
  }
  const char* argument = call.name == "code_interpreter" ? "code" : "query";
  const nlohmann::json arguments = nlohmann::json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
  if (!arguments.is_object() || !arguments.contains(argument) || !arguments[argument].is_string()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a call of the built-in tool %s: expected arguments {\"%s\": a string}", call.name, argument));
  }
  const std::string value = arguments[argument].get<std::string>();
  return call.name == "code_interpreter" ? value : absl::StrCat(call.name, ".call(query=\"", value, "\")");
}

// Llama 3 (the llama3 reference's ChatFormat): <|begin_of_text|>, then per
// message <|start_header_id|>role<|end_header_id|>\n\n content.strip()
// <|eot_id|>, then an open assistant header. Any sequence of roles.
class Llama3Encoder {
 public:
  explicit Llama3Encoder(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {
    prompt_.tokens.push_back(tokenizer.bos_id());
  }

  absl::Status Special(absl::string_view name) {
    const int id = Llama31SpecialId(tokenizer_, name);
    if (id < 0) return absl::InvalidArgumentError(absl::StrCat("this tokenizer has no ", name, " token"));
    prompt_.tokens.push_back(id);
    return absl::OkStatus();
  }
  absl::Status Text(absl::string_view text) {
    ASSIGN_OR_RETURN(std::vector<int> ids, tokenizer_.Encode(text, /*bos=*/false, /*eos=*/false));
    prompt_.tokens.insert(prompt_.tokens.end(), ids.begin(), ids.end());
    return absl::OkStatus();
  }
  absl::Status Header(absl::string_view role) {
    RETURN_IF_ERROR(Special("<|start_header_id|>"));
    RETURN_IF_ERROR(Text(role));
    RETURN_IF_ERROR(Special("<|end_header_id|>"));
    return Text("\n\n");
  }
  absl::Status Turn(absl::string_view role, absl::string_view text) {
    RETURN_IF_ERROR(Header(role));
    RETURN_IF_ERROR(Text(text));
    return Special("<|eot_id|>");
  }
  absl::Status Message(const llama::Message& message) {
    if (message.tool_calls.empty()) {
      return Turn(message.role == Role::kTool ? "ipython" : RoleName(message.role),
                  StripPythonWhitespace(message.content));
    }
    if (message.tool_calls.size() > 1) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "an assistant message has %d tool calls; Llama 3.1 makes one call per message",
          message.tool_calls.size()));
    }
    RETURN_IF_ERROR(Header("assistant"));
    RETURN_IF_ERROR(Text(StripPythonWhitespace(message.content)));
    RETURN_IF_ERROR(Special("<|python_tag|>"));
    ASSIGN_OR_RETURN(const std::string call, CallText(message.tool_calls[0]));
    RETURN_IF_ERROR(Text(call));
    return Special("<|eom_id|>");
  }
  ChatPrompt Finish() && { return std::move(prompt_); }

 private:
  const Tokenizer& tokenizer_;
  ChatPrompt prompt_;
};

absl::StatusOr<ChatPrompt> EncodeLlama3Dialog(const Tokenizer& tokenizer, const Dialog& dialog,
                                              const ToolPrompt& tools) {
  Llama3Encoder encoder(tokenizer);
  size_t first = 0;
  if (!tools.empty()) {
    const bool has_system = dialog[0].role == Role::kSystem;
    first = has_system ? 1 : 0;
    RETURN_IF_ERROR(encoder.Turn("system", ToolSystemText(tools, has_system ? &dialog[0] : nullptr)));
    if (!tools.function_definitions.empty()) RETURN_IF_ERROR(encoder.Turn("user", ToolDefinitionsText(tools)));
  }
  for (size_t i = first; i < dialog.size(); ++i) RETURN_IF_ERROR(encoder.Message(dialog[i]));
  RETURN_IF_ERROR(encoder.Header("assistant"));
  return std::move(encoder).Finish();
}

// Llama 2's format has no place for tools: refused, naming the message.
absl::Status CheckNoTools(const Dialog& dialog, const ToolPrompt& tools) {
  constexpr absl::string_view kWhy = "Llama 2 has no tool-calling format";
  if (!tools.empty()) return absl::InvalidArgumentError(absl::StrCat("tools: ", kWhy));
  for (size_t i = 0; i < dialog.size(); ++i) {
    if (dialog[i].role == Role::kTool || !dialog[i].tool_calls.empty()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "dialog message %d is a tool %s; %s", i, dialog[i].role == Role::kTool ? "result" : "call", kWhy));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ChatPrompt> EncodeDialog(const Tokenizer& tokenizer, const Dialog& dialog) {
  return EncodeDialog(tokenizer, dialog, ToolPrompt());
}

absl::StatusOr<ChatPrompt> EncodeDialog(const Tokenizer& tokenizer, const Dialog& dialog, const ToolPrompt& tools) {
  if (dialog.empty()) {
    return absl::InvalidArgumentError("dialog is empty; expected at least one user message");
  }
  if (tokenizer.family() == Tokenizer::Family::kTiktoken) return EncodeLlama3Dialog(tokenizer, dialog, tools);
  RETURN_IF_ERROR(CheckNoTools(dialog, tools));
  const size_t first = dialog[0].role == Role::kSystem ? 1 : 0;
  if (first == dialog.size()) {
    return absl::InvalidArgumentError(
        "dialog has only a system message; expected a user message after it");
  }
  for (size_t i = first; i < dialog.size(); ++i) {
    const Role expected = (i - first) % 2 == 0 ? Role::kUser : Role::kAssistant;
    if (dialog[i].role != expected) {
      return RoleError(dialog, i, absl::StrCat("\"", RoleName(expected), "\""));
    }
  }
  if (dialog.back().role != Role::kUser) {
    return RoleError(dialog, dialog.size() - 1, "the last message to be from \"user\"");
  }

  // The reference folds the system prompt into the first user message.
  std::vector<std::string> turns;
  for (size_t i = first; i < dialog.size(); ++i) turns.push_back(dialog[i].content);
  if (first == 1) {
    turns[0] = absl::StrCat(kBeginSys, dialog[0].content, kEndSys, turns[0]);
  }

  ChatPrompt prompt;
  prompt.unsafe = HasSpecialTags(dialog);
  for (size_t i = 0; i + 1 < turns.size(); i += 2) {
    ASSIGN_OR_RETURN(std::vector<int> pair,
                     tokenizer.Encode(absl::StrCat(kBeginInst, " ", StripPythonWhitespace(turns[i]), " ", kEndInst,
                                                   " ", StripPythonWhitespace(turns[i + 1]), " "),
                                      /*bos=*/true, /*eos=*/true));
    prompt.tokens.insert(prompt.tokens.end(), pair.begin(), pair.end());
  }
  ASSIGN_OR_RETURN(std::vector<int> last,
                   tokenizer.Encode(absl::StrCat(kBeginInst, " ", StripPythonWhitespace(turns.back()), " ", kEndInst),
                                    /*bos=*/true, /*eos=*/false));
  prompt.tokens.insert(prompt.tokens.end(), last.begin(), last.end());
  return prompt;
}

}  // namespace llama
