#include "tokenizer/chat_format.h"

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
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

absl::string_view RoleName(Role role) { return kRoleNames.Name(role); }

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

namespace {

// Llama 3 (the llama3 reference's ChatFormat): <|begin_of_text|>, then per
// message <|start_header_id|>role<|end_header_id|>\n\n content.strip()
// <|eot_id|>, then an open assistant header. Any sequence of roles.
absl::StatusOr<ChatPrompt> EncodeLlama3Dialog(const Tokenizer& tokenizer, const Dialog& dialog) {
  ChatPrompt prompt;
  prompt.tokens.push_back(tokenizer.bos_id());
  const auto append = [&](absl::string_view text) -> absl::Status {
    ASSIGN_OR_RETURN(std::vector<int> ids, tokenizer.Encode(text, /*bos=*/false, /*eos=*/false));
    prompt.tokens.insert(prompt.tokens.end(), ids.begin(), ids.end());
    return absl::OkStatus();
  };
  const auto header = [&](Role role) -> absl::Status {
    prompt.tokens.push_back(tokenizer.SpecialId("<|start_header_id|>"));
    RETURN_IF_ERROR(append(RoleName(role)));
    prompt.tokens.push_back(tokenizer.SpecialId("<|end_header_id|>"));
    return append("\n\n");
  };
  for (const Message& message : dialog) {
    RETURN_IF_ERROR(header(message.role));
    RETURN_IF_ERROR(append(StripPythonWhitespace(message.content)));
    prompt.tokens.push_back(tokenizer.SpecialId("<|eot_id|>"));
  }
  RETURN_IF_ERROR(header(Role::kAssistant));
  return prompt;
}

}  // namespace

absl::StatusOr<ChatPrompt> EncodeDialog(const Tokenizer& tokenizer, const Dialog& dialog) {
  if (dialog.empty()) {
    return absl::InvalidArgumentError("dialog is empty; expected at least one user message");
  }
  if (tokenizer.family() == Tokenizer::Family::kTiktoken) return EncodeLlama3Dialog(tokenizer, dialog);
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
