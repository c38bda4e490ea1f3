#include "worker/serve/tool_calls.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "worker/grammar/json_schema.h"
#include "worker/serve/request_fields.h"

namespace llama {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// The two names of each Llama 3.1 special token a call involves (see
// Llama31SpecialId): as text, the answer holds one or the other.
constexpr absl::string_view kPythonTags[] = {"<|python_tag|>", "<|reserved_special_token_5|>"};
constexpr absl::string_view kEndOfMessage[] = {"<|eom_id|>", "<|reserved_special_token_4|>"};

// The documented prompt's JSON layout: 4-space indents, and arrays of plain
// values ("required": ["n"]) on one line.
void AppendIndented(const ordered_json& value, int depth, std::string* out) {
  const std::string inner(4 * (depth + 1), ' '), outer(4 * depth, ' ');
  const bool flat = value.empty() || (value.is_array() && std::none_of(value.begin(), value.end(),
                                                                        [](const ordered_json& v) {
                                                                          return v.is_structured();
                                                                        }));
  if (!value.is_structured() || flat) {
    if (!value.is_array() || value.empty()) return void(absl::StrAppend(out, value.dump()));
    absl::StrAppend(out, "[");
    for (size_t i = 0; i < value.size(); ++i) absl::StrAppend(out, i > 0 ? ", " : "", value[i].dump());
    return void(absl::StrAppend(out, "]"));
  }
  absl::StrAppend(out, value.is_object() ? "{\n" : "[\n");
  bool first = true;
  for (const auto& [key, item] : value.items()) {
    absl::StrAppend(out, first ? "" : ",\n", inner, value.is_object() ? ordered_json(key).dump() + ": " : "");
    AppendIndented(item, depth + 1, out);
    first = false;
  }
  absl::StrAppend(out, "\n", outer, value.is_object() ? "}" : "]");
}

// A tool's parameters: its schema; without one, any object, or for a
// built-in tool the one string argument its call is written with.
ordered_json ParametersSchema(const FunctionTool& tool) {
  if (!tool.parameters.is_null()) return tool.parameters;
  if (!IsBuiltinTool(tool.name)) return {{"type", "object"}};
  const char* argument = tool.name == "code_interpreter" ? "code" : "query";
  ordered_json schema = ordered_json::object();
  schema["type"] = "object";
  schema["properties"][argument] = {{"type", "string"}};
  schema["required"] = ordered_json::array({argument});
  return schema;
}

// {"name": <the tool's>, "parameters": <its schema>}, both required.
ordered_json CallSchema(const FunctionTool& tool) {
  ordered_json properties = ordered_json::object();
  properties["name"] = {{"const", tool.name}};
  properties["parameters"] = ParametersSchema(tool);
  ordered_json schema = ordered_json::object();
  schema["type"] = "object";
  schema["properties"] = std::move(properties);
  schema["required"] = ordered_json::array({"name", "parameters"});
  return schema;
}

bool ConsumeAny(absl::string_view* text, absl::Span<const absl::string_view> prefixes) {
  for (absl::string_view prefix : prefixes) {
    if (absl::ConsumePrefix(text, prefix)) return true;
  }
  return false;
}

// {"name": ..., "parameters": {...}}, "arguments" for "parameters" and an
// optional "type": "function" (the reference's encoder writes one).
std::optional<ToolCall> ParseJsonCall(const ToolUse& use, absl::string_view text) {
  const ordered_json call = ordered_json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (!call.is_object() || !call.contains("name") || !call["name"].is_string()) return std::nullopt;
  if (call.contains("type") && call["type"] != "function") return std::nullopt;
  const std::string name = call["name"].get<std::string>();
  if (use.Find(name) == nullptr) return std::nullopt;
  const char* field = call.contains("parameters") ? "parameters" : "arguments";
  const ordered_json arguments = call.contains(field) ? call[field] : ordered_json::object();
  if (!arguments.is_object()) return std::nullopt;
  return ToolCall{"", name, arguments.dump()};
}

// brave_search.call(query="...") or wolfram_alpha.call(query="..."), as
// the reference's BUILTIN_TOOL_PATTERN reads them.
std::optional<ToolCall> ParseBuiltinCall(const ToolUse& use, absl::string_view text) {
  for (absl::string_view name : {"brave_search", "wolfram_alpha"}) {
    absl::string_view query = text;
    if (use.Find(name) != nullptr && absl::ConsumePrefix(&query, absl::StrCat(name, ".call(query=\"")) &&
        absl::ConsumeSuffix(&query, "\")")) {
      return ToolCall{"", std::string(name), json{{"query", std::string(query)}}.dump()};
    }
  }
  return std::nullopt;
}

// `a` is a prefix of `b` or `b` of `a`: more text may yet make `a` start with `b`.
bool MayStartWith(absl::string_view a, absl::string_view b) {
  const size_t n = std::min(a.size(), b.size());
  return a.substr(0, n) == b.substr(0, n);
}

// An answer that begins so may still become a call.
bool MayBeCall(const ToolUse& use, absl::string_view text) {
  text = absl::StripLeadingAsciiWhitespace(text);
  if (text.empty() || text[0] == '{') return true;
  for (absl::string_view tag : kPythonTags) {
    if (MayStartWith(text, tag)) return true;
  }
  for (absl::string_view name : {"brave_search", "wolfram_alpha"}) {
    if (use.Find(name) != nullptr && MayStartWith(text, absl::StrCat(name, ".call("))) return true;
  }
  return false;
}

}  // namespace

const FunctionTool* ToolUse::Find(absl::string_view name) const {
  for (const FunctionTool& tool : tools) {
    if (tool.name == name) return &tool;
  }
  return nullptr;
}

std::string FunctionDefinition(const FunctionTool& tool) {
  ordered_json function = ordered_json::object();
  function["name"] = tool.name;
  function["description"] = tool.description;
  function["parameters"] = tool.parameters.is_null() ? ordered_json::object() : tool.parameters;
  ordered_json definition = ordered_json::object();
  definition["type"] = "function";
  definition["function"] = std::move(function);
  std::string out;
  AppendIndented(definition, 0, &out);
  return out;
}

ToolPrompt MakeToolPrompt(const ToolUse& use, absl::string_view today) {
  ToolPrompt prompt;
  for (const FunctionTool& tool : use.tools) {
    if (IsBuiltinTool(tool.name)) {
      prompt.builtin_tools.push_back(tool.name);
    } else {
      prompt.function_definitions.push_back(FunctionDefinition(tool));
    }
  }
  if (!prompt.empty()) prompt.today = std::string(today);
  return prompt;
}

std::string LlamaPromptDate() { return absl::FormatTime("%d %B %Y", absl::Now(), absl::UTCTimeZone()); }

absl::StatusOr<std::string> ForcedCallGbnf(const ToolUse& use, std::string* param) {
  ordered_json any_of = ordered_json::array();
  for (size_t i = 0; i < use.tools.size(); ++i) {
    if (use.choice == ToolChoice::kNamed && use.tools[i].name != use.named) continue;
    // Each alone first, so that an error names the tool whose schema it is in.
    absl::StatusOr<std::string> alone = grammar::JsonSchemaToGbnf(CallSchema(use.tools[i]));
    if (!alone.ok()) {
      *param = absl::StrCat("tools[", i, "].function.parameters");
      return alone.status();
    }
    if (use.choice == ToolChoice::kNamed) return alone;
    any_of.push_back(CallSchema(use.tools[i]));
  }
  *param = "tools";
  return grammar::JsonSchemaToGbnf(ordered_json{{"anyOf", std::move(any_of)}});
}

absl::string_view StripEndOfMessage(absl::string_view text) {
  for (absl::string_view end : kEndOfMessage) {
    if (absl::ConsumeSuffix(&text, end)) break;
  }
  return text;
}

std::optional<ToolCall> ParseToolCall(const ToolUse& use, absl::string_view text) {
  text = absl::StripAsciiWhitespace(StripEndOfMessage(text));
  const bool tagged = ConsumeAny(&text, kPythonTags);
  text = absl::StripLeadingAsciiWhitespace(text);
  if (std::optional<ToolCall> call = ParseJsonCall(use, text)) return call;
  if (std::optional<ToolCall> call = ParseBuiltinCall(use, text)) return call;
  // Code after the tag is code_interpreter's (the reference's reading).
  if (tagged && use.Find("code_interpreter") != nullptr) {
    return ToolCall{"", "code_interpreter", json{{"code", std::string(text)}}.dump()};
  }
  return std::nullopt;
}

std::string ToolCallStream::Push(absl::string_view text) {
  if (passing_) return std::string(StripEndOfMessage(text));
  held_.append(text.data(), text.size());
  if (MayBeCall(*use_, held_)) return "";
  passing_ = true;
  std::string out(StripEndOfMessage(held_));
  held_.clear();
  return out;
}

std::optional<ToolCall> ToolCallStream::Finish(std::string* rest) {
  *rest = std::string(StripEndOfMessage(held_));
  return passing_ ? std::nullopt : ParseToolCall(*use_, held_);
}

namespace internal_openai {
namespace {

// OpenAI's rule for function names; it also keeps them plain in the
// prompt and in the forced call's grammar.
bool IsFunctionName(absl::string_view name) {
  return !name.empty() && name.size() <= 64 &&
         std::all_of(name.begin(), name.end(), [](char c) { return absl::ascii_isalnum(c) || c == '_' || c == '-'; });
}

void ParseTool(Fields& f, const ordered_json& tool, size_t i, ToolUse* use) {
  const std::string at = absl::StrCat("tools[", i, "]");
  if (!tool.is_object() || tool.value("type", ordered_json()) != "function" || !tool.contains("function") ||
      !tool["function"].is_object()) {
    return void(f.Fail(at, "expected {\"type\": \"function\", \"function\": {\"name\", \"description\", "
                           "\"parameters\"}}"));
  }
  const ordered_json& function = tool["function"];
  const ordered_json name = function.value("name", ordered_json());
  if (!name.is_string() || !IsFunctionName(name.get<std::string>())) {
    return void(f.Fail(at + ".function.name", "expected 1 to 64 letters, digits, '_' or '-'"));
  }
  FunctionTool parsed{name.get<std::string>(), "", function.value("parameters", ordered_json())};
  if (use->Find(parsed.name) != nullptr) {
    return void(f.Fail(at + ".function.name", absl::StrFormat("\"%s\" is offered twice", parsed.name)));
  }
  const ordered_json description = function.value("description", ordered_json(""));
  if (!description.is_string()) return void(f.Fail(at + ".function.description", "expected a string"));
  parsed.description = description.get<std::string>();
  if (!parsed.parameters.is_null() && !parsed.parameters.is_object()) {
    return void(f.Fail(at + ".function.parameters", "expected a JSON Schema object"));
  }
  use->tools.push_back(std::move(parsed));
}

void ParseToolChoice(Fields& f, const json& choice, ToolUse* use) {
  constexpr char kExpected[] =
      "expected \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}";
  if (choice == "none" || choice == "auto" || choice == "required") {
    use->choice = choice == "none" ? ToolChoice::kNone : choice == "auto" ? ToolChoice::kAuto : ToolChoice::kRequired;
  } else if (choice.is_object() && choice.value("type", json()) == "function" && choice.contains("function") &&
             choice["function"].is_object() && choice["function"].value("name", json()).is_string()) {
    use->choice = ToolChoice::kNamed;
    use->named = choice["function"]["name"].get<std::string>();
    if (use->Find(use->named) == nullptr) {
      return void(f.Fail("tool_choice", absl::StrFormat("names \"%s\", which is not among the tools", use->named)));
    }
  } else {
    return void(f.Fail("tool_choice", kExpected));
  }
  if (use->choice != ToolChoice::kNone && use->tools.empty()) f.Fail("tool_choice", "needs tools");
}

}  // namespace

void ParseTools(Fields& f, const char* constrained_by, GenerationParams* p) {
  ToolUse& use = p->tools;
  if (f.ok() && f.Has("tools")) {
    const ordered_json& tools = f.GetOrdered("tools");
    if (!tools.is_array()) return void(f.Fail("tools", "expected an array of tools"));
    for (size_t i = 0; f.ok() && i < tools.size(); ++i) ParseTool(f, tools[i], i, &use);
  }
  if (f.ok() && f.Has("tool_choice")) ParseToolChoice(f, f.Get("tool_choice"), &use);
  if (!f.ok() || (use.choice != ToolChoice::kRequired && use.choice != ToolChoice::kNamed)) return;
  if (constrained_by != nullptr) {
    return void(f.Fail("tool_choice", absl::StrFormat("a required call and %s both constrain the answer: give one "
                                                      "of them",
                                                      constrained_by)));
  }
  std::string param;
  absl::StatusOr<std::string> gbnf = ForcedCallGbnf(use, &param);
  if (!gbnf.ok()) return void(f.Fail(param, std::string(gbnf.status().message())));
  p->grammar = *std::move(gbnf);
}

}  // namespace internal_openai
}  // namespace llama
