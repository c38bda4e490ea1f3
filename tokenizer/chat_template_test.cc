#include "tokenizer/chat_template.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace llama {
namespace {

using ::testing::HasSubstr;

// Shaped like the template of meta-llama/Llama-2-7b-chat-hf's tokenizer_config.json.
constexpr char kLlama2Hf[] =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
    "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
    "{% for message in loop_messages %}{% if loop.index0 == 0 and system_message != false %}{% set content = "
    "'<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = "
    "message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + "
    "' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}"
    "{% endfor %}";

// Shaped like Llama 3 Instruct's.
constexpr char kLlama3Hf[] =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
    "message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 "
    "%}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";

// Shaped like Llama 3.1 Instruct's tool-calling template (abridged).
constexpr char kLlama31Tools[] =
    "{{- bos_token }}{%- if custom_tools is defined %}{%- set tools = custom_tools %}{%- endif %}"
    "{%- if not tools_in_user_message is defined %}{%- set tools_in_user_message = true %}{%- endif %}"
    "{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}{%- if builtin_tools is defined or tools is not none "
    "%}{{- \"Environment: ipython\\n\" }}{%- endif %}{{- \"Cutting Knowledge Date: December 2023\\n\" }}"
    "{%- for message in messages %}{%- if message.role == 'ipython' or message.role == 'tool' %}"
    "{{- \"<|start_header_id|>ipython<|end_header_id|>\\n\\n\" }}{%- if builtin_tools is defined %}"
    "{{- \"<|eom_id|>\" }}{%- else %}{{- \"<|eot_id|>\" }}{%- endif %}{%- endif %}{%- endfor %}"
    "{{- '<|python_tag|>' + tool_call.name + '.call(' }}";

constexpr char kChatMl[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

// Mistral's: [INST] without Llama 2's <<SYS>>, a different format.
constexpr char kMistral[] =
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + "
    "' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% endif %}{% endfor %}";

TEST(ChatTemplateTest, RecognisesLlama2sAndLlama3sTemplates) {
  EXPECT_EQ(*RecognizeChatTemplate(kLlama2Hf, "a"), ChatTemplateKind::kLlama2);
  EXPECT_EQ(*RecognizeChatTemplate(kLlama3Hf, "a"), ChatTemplateKind::kLlama3);
  EXPECT_EQ(*RecognizeChatTemplate(kLlama31Tools, "a"), ChatTemplateKind::kLlama3);
  for (ChatTemplateKind kind : {ChatTemplateKind::kLlama2, ChatTemplateKind::kLlama3}) {
    EXPECT_EQ(*RecognizeChatTemplate(StandardChatTemplate(kind), "ours"), kind);
  }
}

TEST(ChatTemplateTest, RefusesOtherTemplatesSayingWhichFlagToPass) {
  for (const char* other : {kChatMl, kMistral, ""}) {
    absl::StatusOr<ChatTemplateKind> kind = RecognizeChatTemplate(other, "model/tokenizer_config.json");
    ASSERT_FALSE(kind.ok()) << other;
    EXPECT_EQ(kind.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(kind.status().message(), HasSubstr("model/tokenizer_config.json: the chat template is neither"));
    EXPECT_THAT(kind.status().message(), HasSubstr("pass --chat_format=llama2|llama3"));
  }
}

TEST(ChatTemplateTest, ParsesTheFlag) {
  EXPECT_EQ(*ParseChatFormatFlag("llama2"), ChatTemplateKind::kLlama2);
  EXPECT_EQ(*ParseChatFormatFlag("llama3"), ChatTemplateKind::kLlama3);
  absl::StatusOr<ChatTemplateKind> chatml = ParseChatFormatFlag("chatml");
  EXPECT_EQ(chatml.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(chatml.status().message(), HasSubstr("--chat_format=\"chatml\": expected llama2 or llama3"));
}

}  // namespace
}  // namespace llama
