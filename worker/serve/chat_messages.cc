// Chat's messages as OpenAI's clients send them, into a Dialog.

#include "absl/strings/str_cat.h"
#include "worker/serve/request_fields.h"

namespace llama::internal_openai {
namespace {

constexpr char kRoles[] = "expected \"system\", \"user\", \"assistant\" or \"tool\"";

bool ParseRoleField(Fields& f, const std::string& at, const json& m, Role* role) {
  const json name = m.is_object() ? m.value("role", json()) : json();
  if (name == "system" || name == "user" || name == "assistant" || name == "tool") {
    *role = name == "system" ? Role::kSystem : name == "user" ? Role::kUser : name == "assistant" ? Role::kAssistant
                                                                                                  : Role::kTool;
    return true;
  }
  return f.Fail(at + ".role", name.is_string() ? absl::StrCat("\"", name.get<std::string>(), "\": ", kRoles) : kRoles);
}

// A string, or text parts; an assistant's that calls tools may be null.
bool ParseContent(Fields& f, const std::string& at, const json& m, Message* message) {
  const json content = m.value("content", json());
  if (content.is_string()) {
    message->content = content.get<std::string>();
    return true;
  }
  if (content.is_null() && !message->tool_calls.empty()) return true;
  if (!content.is_array()) return f.Fail(at + ".content", "expected a string");
  for (const json& part : content) {  // Content parts: text only.
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") ||
        !part["text"].is_string()) {
      return f.Fail(at + ".content", "expected a string or an array of {\"type\": \"text\", \"text\": ...} parts");
    }
    message->content += part["text"].get<std::string>();
  }
  return true;
}

// An assistant's tool_calls: [{"id", "type": "function", "function":
// {"name", "arguments": the JSON text of an object}}].
bool ParseToolCalls(Fields& f, const std::string& at, const json& calls, Message* message) {
  if (!calls.is_array()) return f.Fail(at + ".tool_calls", "expected an array of tool calls");
  for (size_t j = 0; j < calls.size(); ++j) {
    const std::string call_at = absl::StrCat(at, ".tool_calls[", j, "]");
    const json& call = calls[j];
    const json function = call.is_object() ? call.value("function", json()) : json();
    if (!function.is_object() || !function.value("name", json()).is_string() ||
        !function.value("arguments", json()).is_string()) {
      return f.Fail(call_at, "expected {\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}");
    }
    const std::string arguments = function["arguments"].get<std::string>();
    if (!json::parse(arguments, nullptr, /*allow_exceptions=*/false).is_object()) {
      return f.Fail(call_at + ".function.arguments", "expected the JSON text of an object");
    }
    const json id = call.value("id", json(""));
    message->tool_calls.push_back(
        {id.is_string() ? id.get<std::string>() : id.dump(), function["name"].get<std::string>(), arguments});
  }
  return true;
}

}  // namespace

void ParseMessages(Fields& f, const json& body, Dialog* out) {
  if (!f.ok()) return;
  f.Has("messages");
  const json messages = body.value("messages", json());
  if (!messages.is_array() || messages.empty()) {
    return void(f.Fail("messages", messages.is_null() ? "required" : "expected a non-empty array of messages"));
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string at = absl::StrCat("messages[", i, "]");
    const json& m = messages[i];
    Message message;
    if (!ParseRoleField(f, at, m, &message.role)) return;
    const json calls = m.value("tool_calls", json());
    if (!calls.is_null()) {
      if (message.role != Role::kAssistant) return void(f.Fail(at + ".tool_calls", "only an assistant's message"));
      if (!ParseToolCalls(f, at, calls, &message)) return;
    }
    // A tool's result follows the call it answers, which is all that Llama
    // 3.1 pairs them by: its tool_call_id is not needed.
    if (!ParseContent(f, at, m, &message)) return;
    out->push_back(std::move(message));
  }
}

}  // namespace llama::internal_openai
