// Fuzz target: the OpenAI request parsers on arbitrary bodies. Each body is
// parsed or refused with a 400 that says why; nothing throws (an exception
// from the JSON library ends the process: a failure), and what is parsed
// keeps the ranges the parsers promise, which the server relies on without
// checking again.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "worker/serve/openai_api.h"

namespace {

void Expect(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz: a parsed request breaks its promise: %s\n", what);
  std::abort();
}

void ExpectRefusal(const llama::ApiError& error) {
  Expect(error.status == 400 && !error.message.empty(), "a refusal is a 400 with a message");
}

void ExpectParams(const llama::GenerationParams& p) {
  Expect(p.sampling.token.temperature >= 0 && p.sampling.token.temperature <= 2, "temperature in [0, 2]");
  Expect(p.sampling.token.top_p > 0 && p.sampling.token.top_p <= 1, "top_p in (0, 1]");
  Expect(p.sampling.token.top_k >= 0, "top_k >= 0");
  Expect(p.sampling.token.min_p >= 0 && p.sampling.token.min_p <= 1, "min_p in [0, 1]");
  Expect(p.n >= 1 && p.n <= 16, "n in [1, 16]");
  Expect(p.top_logprobs >= 0 && p.top_logprobs <= 5, "top_logprobs in [0, 5]");
  Expect(!p.max_tokens.has_value() || *p.max_tokens >= 0, "max_tokens >= 0");
  Expect(p.min_tokens >= 0, "min_tokens >= 0");
  Expect(p.stop.size() <= 4, "at most 4 stop strings");
  for (const std::string& s : p.stop) Expect(!s.empty(), "no empty stop string");
  Expect(std::abs(p.sampling.presence_penalty) <= 2 && std::abs(p.sampling.frequency_penalty) <= 2,
         "penalties in [-2, 2]");
  for (const auto& [token, bias] : p.sampling.logit_bias) {
    Expect(token >= 0 && std::abs(bias) <= 100, "logit_bias entries");
  }
  // stop_token_ids are only int32 here: the server checks both ends against
  // the vocabulary, with a message that names it (api_server.cc).
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  llama::ApiError error;
  llama::CompletionRequest completion;
  if (llama::ParseCompletionRequest(body, &completion, &error)) {
    Expect(!completion.prompts.empty() || !completion.prompt_ids.empty(), "a completion has a prompt");
    for (const auto& ids : completion.prompt_ids) Expect(!ids.empty(), "no empty id prompt");
    ExpectParams(completion.params);
  } else {
    ExpectRefusal(error);
  }
  llama::ChatRequest chat;
  if (llama::ParseChatRequest(body, &chat, &error)) {
    Expect(!chat.messages.empty(), "a chat has messages");
    ExpectParams(chat.params);
  } else {
    ExpectRefusal(error);
  }
  llama::TokenizeRequest tokenize;
  if (llama::ParseTokenizeRequest(body, &tokenize, &error)) {
    Expect(tokenize.prompt.has_value() || !tokenize.messages.empty(), "tokenize has a prompt or messages");
  } else {
    ExpectRefusal(error);
  }
  llama::DetokenizeRequest detokenize;
  if (!llama::ParseDetokenizeRequest(body, &detokenize, &error)) ExpectRefusal(error);
  return 0;
}
