#include "tokenizer/chat_format.h"

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace llama {
namespace {

constexpr absl::string_view kBeginInst = "[INST]";
constexpr absl::string_view kEndInst = "[/INST]";
constexpr absl::string_view kBeginSys = "<<SYS>>\n";
constexpr absl::string_view kEndSys = "\n<</SYS>>\n\n";
constexpr absl::string_view kSpecialTags[] = {"[INST]", "[/INST]", "<<SYS>>", "<</SYS>>"};

bool IsPythonSpace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

// Returned for a malformed byte; never whitespace.
constexpr uint32_t kNotACodePoint = 0xFFFFFFFF;

// Decodes the UTF-8 character at text[pos], setting *len to its length.
uint32_t CodePointAt(absl::string_view text, size_t pos, size_t* len) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t lead = byte(pos);
  *len = 1;
  if (lead < 0x80) return lead;
  const int extra = lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : lead >= 0xC0 ? 1 : -1;
  if (extra < 0 || pos + extra >= text.size()) return kNotACodePoint;
  uint32_t c = lead & (0x3F >> extra);
  for (int i = 1; i <= extra; ++i) {
    if ((byte(pos + i) & 0xC0) != 0x80) return kNotACodePoint;
    c = (c << 6) | (byte(pos + i) & 0x3F);
  }
  *len = 1 + extra;
  return c;
}

// Start of the last UTF-8 character ending at text[end - 1].
size_t LastCharStart(absl::string_view text, size_t end) {
  size_t start = end - 1;
  while (start > 0 && end - start < 4 && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) {
    --start;
  }
  return start;
}

absl::Status RoleError(const Dialog& dialog, size_t index, absl::string_view expected) {
  return absl::InvalidArgumentError(absl::StrFormat(
      "dialog message %d has role \"%s\"; expected %s (an optional system message first, then "
      "user and assistant alternating, ending with user)",
      index, RoleName(dialog[index].role), expected));
}

}  // namespace

absl::string_view RoleName(Role role) {
  switch (role) {
    case Role::kSystem:
      return "system";
    case Role::kUser:
      return "user";
    case Role::kAssistant:
      return "assistant";
  }
  return "unknown";
}

absl::StatusOr<Role> ParseRole(absl::string_view name) {
  if (name == "system") return Role::kSystem;
  if (name == "user") return Role::kUser;
  if (name == "assistant") return Role::kAssistant;
  return absl::InvalidArgumentError(absl::StrFormat(
      "role \"%s\": expected \"system\", \"user\" or \"assistant\"", name));
}

absl::string_view StripPythonWhitespace(absl::string_view text) {
  size_t begin = 0;
  while (begin < text.size()) {
    size_t len;
    if (!IsPythonSpace(CodePointAt(text, begin, &len))) break;
    begin += len;
  }
  size_t end = text.size();
  while (end > begin) {
    const size_t start = LastCharStart(text, end);
    size_t len;
    if (start < begin || !IsPythonSpace(CodePointAt(text, start, &len)) || start + len != end) {
      break;
    }
    end = start;
  }
  return text.substr(begin, end - begin);
}

bool HasSpecialTags(const Dialog& dialog) {
  for (const Message& message : dialog) {
    for (absl::string_view tag : kSpecialTags) {
      if (absl::StrContains(message.content, tag)) return true;
    }
  }
  return false;
}

absl::StatusOr<ChatPrompt> EncodeDialog(const Tokenizer& tokenizer, const Dialog& dialog) {
  if (dialog.empty()) {
    return absl::InvalidArgumentError("dialog is empty; expected at least one user message");
  }
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
    absl::StatusOr<std::vector<int>> pair = tokenizer.Encode(
        absl::StrCat(kBeginInst, " ", StripPythonWhitespace(turns[i]), " ", kEndInst, " ",
                     StripPythonWhitespace(turns[i + 1]), " "),
        /*bos=*/true, /*eos=*/true);
    if (!pair.ok()) return pair.status();
    prompt.tokens.insert(prompt.tokens.end(), pair->begin(), pair->end());
  }
  absl::StatusOr<std::vector<int>> last = tokenizer.Encode(
      absl::StrCat(kBeginInst, " ", StripPythonWhitespace(turns.back()), " ", kEndInst),
      /*bos=*/true, /*eos=*/false);
  if (!last.ok()) return last.status();
  prompt.tokens.insert(prompt.tokens.end(), last->begin(), last->end());
  return prompt;
}

}  // namespace llama
