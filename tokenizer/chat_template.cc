#include "tokenizer/chat_template.h"

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"

namespace llama {
namespace {

// The system prompt is folded into the first user message and every message
// is stripped, as Llama.chat_completion does; each finished exchange is
// <s>[INST] ... [/INST] ... </s>.
constexpr char kLlama2Template[] =
    "{%- if messages[0]['role'] == 'system' -%}"
    "{%- set system_prefix = '<<SYS>>\\n' + messages[0]['content'] + '\\n<</SYS>>\\n\\n' -%}"
    "{%- set turns = messages[1:] -%}"
    "{%- else -%}"
    "{%- set system_prefix = '' -%}"
    "{%- set turns = messages -%}"
    "{%- endif -%}"
    "{%- for message in turns -%}"
    "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}"
    "{{- raise_exception('Llama 2 chats alternate user and assistant messages, after an optional system one') -}}"
    "{%- endif -%}"
    "{%- if message['role'] == 'user' -%}"
    "{%- set text = system_prefix + message['content'] if loop.first else message['content'] -%}"
    "{{- bos_token + '[INST] ' + text | trim + ' [/INST]' -}}"
    "{%- else -%}"
    "{{- ' ' + message['content'] | trim + ' ' + eos_token -}}"
    "{%- endif -%}"
    "{%- endfor -%}";

// BOS, then each message under its role's header, stripped and ended by
// <|eot_id|>, then the assistant's header: the llama3 reference's ChatFormat.
constexpr char kLlama3Template[] =
    "{{- bos_token -}}"
    "{%- for message in messages -%}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + "
    "'<|eot_id|>' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}"
    "{%- endif -%}";

bool ContainsAll(absl::string_view text, std::initializer_list<absl::string_view> markers) {
  for (absl::string_view marker : markers) {
    if (!absl::StrContains(text, marker)) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<ChatTemplateKind> RecognizeChatTemplate(absl::string_view jinja, absl::string_view source) {
  if (ContainsAll(jinja, {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"})) return ChatTemplateKind::kLlama3;
  if (ContainsAll(jinja, {"[INST]", "[/INST]", "<<SYS>>"})) return ChatTemplateKind::kLlama2;
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: the chat template is neither Llama 2's ([INST] ... [/INST] with <<SYS>>) nor Llama 3's "
      "(<|start_header_id|> ... <|end_header_id|> with <|eot_id|>); pass --chat_format=llama2|llama3 to say which "
      "of the two formats the model was trained on",
      source));
}

absl::StatusOr<ChatTemplateKind> ParseChatFormatFlag(absl::string_view value) {
  if (value == "llama2") return ChatTemplateKind::kLlama2;
  if (value == "llama3") return ChatTemplateKind::kLlama3;
  return absl::InvalidArgumentError(
      absl::StrFormat("--chat_format=\"%s\": expected llama2 or llama3", absl::CHexEscape(value)));
}

absl::string_view StandardChatTemplate(ChatTemplateKind kind) {
  return kind == ChatTemplateKind::kLlama2 ? kLlama2Template : kLlama3Template;
}

}  // namespace llama
