// The Jinja chat templates Hugging Face's tokenizer_config.json and GGUF's
// tokenizer.chat_template carry, told apart as the chat format of ours they
// stand for (chat_format.h), and the templates we write into GGUF files.
//
// A template is recognised by the markers only its format has, as llama.cpp's
// llama-server recognises one: Llama 2's [INST] ... [/INST] with <<SYS>>,
// Llama 3's <|start_header_id|> ... <|end_header_id|> with <|eot_id|> (3.0 to
// 3.3, 3.1's tool-calling template included). Nothing is rendered: our chat
// format builds the prompt as the references do.

#ifndef LLAMA_TOKENIZER_CHAT_TEMPLATE_H_
#define LLAMA_TOKENIZER_CHAT_TEMPLATE_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace llama {

enum class ChatTemplateKind { kLlama2, kLlama3 };

// Llama 2's or Llama 3's template (3.x, including 3.1's tool-calling one).
// Anything else (ChatML, Mistral's [INST] without <<SYS>>, ...) is an
// InvalidArgument error naming `source` and saying to pass
// --chat_format=llama2|llama3.
absl::StatusOr<ChatTemplateKind> RecognizeChatTemplate(absl::string_view jinja, absl::string_view source);

// "llama2" / "llama3" -> kind (a --chat_format flag); InvalidArgument naming
// the flag otherwise.
absl::StatusOr<ChatTemplateKind> ParseChatFormatFlag(absl::string_view value);

// Our Jinja template for `kind`: the prompt the reference's chat_completion
// builds (bos_token and eos_token as Hugging Face's renderers define them),
// which RecognizeChatTemplate and llama.cpp both recognise.
absl::string_view StandardChatTemplate(ChatTemplateKind kind);

}  // namespace llama

#endif  // LLAMA_TOKENIZER_CHAT_TEMPLATE_H_
