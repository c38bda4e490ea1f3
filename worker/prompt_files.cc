#include "worker/prompt_files.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"

namespace llama {
namespace {

using json = nlohmann::json;

absl::StatusOr<std::string> ReadFile(const std::string& path, absl::string_view what) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return absl::NotFoundError(absl::StrFormat("%s \"%s\": cannot open for reading", what, path));
  }
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

// 1-based line of byte `offset` in `text`.
size_t LineOf(absl::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  return 1 + std::count(text.begin(), text.begin() + offset, '\n');
}

// Parses `text` (which starts at line `first_line` of `source`); errors carry
// the line where the JSON went wrong.
absl::StatusOr<json> ParseJson(absl::string_view text, absl::string_view source,
                               size_t first_line) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::parse_error& error) {
    const size_t line = first_line - 1 + LineOf(text, error.byte == 0 ? 0 : error.byte - 1);
    // nlohmann's message starts "[json.exception.parse_error.101] parse error at line..., "
    // which repeats our position; keep its explanation after the last ": ".
    std::string detail = error.what();
    if (size_t colon = detail.rfind(": "); colon != std::string::npos) {
      detail = detail.substr(colon + 2);
    }
    return absl::InvalidArgumentError(
        absl::StrFormat("%s:%d: invalid JSON: %s", source, line, detail));
  }
}

absl::Status ExpectPromptString(const json& value, absl::string_view where,
                                std::vector<std::string>* prompts) {
  if (value.is_string()) {
    prompts->push_back(value.get<std::string>());
    return absl::OkStatus();
  }
  if (value.is_object()) {
    auto it = value.find("prompt");
    if (it == value.end()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: object has no field \"prompt\"", where));
    }
    if (!it->is_string()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: field \"prompt\" is a %s; expected a string", where, it->type_name()));
    }
    prompts->push_back(it->get<std::string>());
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: found a %s; expected a string or {\"prompt\": \"...\"}", where, value.type_name()));
}

absl::StatusOr<Message> ParseMessage(const json& value, absl::string_view where) {
  if (!value.is_object()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: found a %s; expected {\"role\": ..., \"content\": ...}", where, value.type_name()));
  }
  Message message;
  for (const char* field : {"role", "content"}) {
    auto it = value.find(field);
    if (it == value.end()) {
      return absl::InvalidArgumentError(absl::StrFormat("%s: missing field \"%s\"", where, field));
    }
    if (!it->is_string()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: field \"%s\" is a %s; expected a string", where, field, it->type_name()));
    }
  }
  absl::StatusOr<Role> role = ParseRole(value["role"].get<std::string>());
  if (!role.ok()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: field \"role\": %s", where, role.status().message()));
  }
  message.role = *role;
  message.content = value["content"].get<std::string>();
  return message;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ParsePrompts(absl::string_view text,
                                                      absl::string_view source) {
  std::vector<std::string> prompts;
  if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(text), "[")) {
    ASSIGN_OR_RETURN(json array, ParseJson(text, source, 1));
    for (size_t i = 0; i < array.size(); ++i) {
      if (!array[i].is_string()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: element %d of the prompts array is a %s; expected a string", source, i,
            array[i].type_name()));
      }
      prompts.push_back(array[i].get<std::string>());
    }
  } else {
    size_t line_number = 0;
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      ++line_number;
      if (absl::StripAsciiWhitespace(line).empty()) continue;
      ASSIGN_OR_RETURN(json value, ParseJson(line, source, line_number));
      RETURN_IF_ERROR(ExpectPromptString(value, absl::StrFormat("%s:%d", source, line_number), &prompts));
    }
  }
  if (prompts.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: no prompts found", source));
  }
  return prompts;
}

absl::StatusOr<std::vector<Dialog>> ParseDialogs(absl::string_view text,
                                                 absl::string_view source) {
  ASSIGN_OR_RETURN(json root, ParseJson(text, source, 1));
  if (!root.is_array()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: top level is a %s; expected an array of dialogs", source, root.type_name()));
  }
  std::vector<Dialog> dialogs;
  for (size_t d = 0; d < root.size(); ++d) {
    const json& messages = root[d];
    if (!messages.is_array()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: dialog %d is a %s; expected an array of messages", source, d,
                          messages.type_name()));
    }
    Dialog dialog;
    for (size_t m = 0; m < messages.size(); ++m) {
      ASSIGN_OR_RETURN(Message message,
                       ParseMessage(messages[m], absl::StrFormat("%s: dialog %d, message %d", source, d, m)));
      dialog.push_back(std::move(message));
    }
    dialogs.push_back(std::move(dialog));
  }
  if (dialogs.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: no dialogs found", source));
  }
  return dialogs;
}

absl::StatusOr<std::vector<std::string>> ReadPromptsFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path, "prompts file"));
  return ParsePrompts(text, path);
}

absl::StatusOr<std::vector<Dialog>> ReadDialogsFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path, "dialogs file"));
  return ParseDialogs(text, path);
}

}  // namespace llama
