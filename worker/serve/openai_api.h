// The OpenAI API's request and response shapes, as vLLM serves them:
// /v1/completions and /v1/chat/completions bodies parsed and checked
// (every error names the field, in OpenAI's error object), and the JSON of
// responses and streamed chunks. No HTTP and no engine here.

#ifndef LLAMA_WORKER_SERVE_OPENAI_API_H_
#define LLAMA_WORKER_SERVE_OPENAI_API_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/string_view.h"
#include "tokenizer/chat_format.h"
#include "worker/sampling/sampling_params.h"
#include "worker/serve/tool_calls.h"

namespace llama {

// An error as the API reports it: {"error": {"message", "type", "param",
// "code"}} with an HTTP status.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // Empty: null.
  std::string code;   // Empty: null.

  std::string Json() const;
};

// OpenAI's documented defaults (temperature 1, top_p 1: the API's
// protocol, not the reference's 0.6 and 0.9).
inline SamplingParams OpenAiSampling() {
  SamplingParams sampling;
  sampling.token.temperature = 1.0f;
  sampling.token.top_p = 1.0f;
  return sampling;
}

// The sampling fields both endpoints take.
struct GenerationParams {
  std::optional<int64_t> max_tokens;  // Completions default 16; chat: to the end of the context.
  // temperature, top_p (OpenAI's defaults: 1 and 1), vLLM's and
  // llama.cpp's top_k (-1 in the body: off) and min_p, seed, the penalties
  // and logit_bias, each in SamplingParams' range.
  SamplingParams sampling = OpenAiSampling();
  bool seeded = false;  // The body gave a seed; else each request draws one.
  int n = 1;
  std::vector<std::string> stop;  // At most 4.
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;       // The chosen tokens' log-probabilities.
  int top_logprobs = 0;        // And this many most likely tokens at each position (0 to 5).
  bool echo = false;           // Completions: the prompt leads the text (and its log-probabilities).
  // vLLM's: more stop tokens, and no stop token (the model's or these)
  // before min_tokens tokens; stop strings apply throughout.
  std::vector<int> stop_token_ids;
  int64_t min_tokens = 0;
  bool ignore_eos = false;     // vLLM's extension, for benchmarks: generate max_tokens whatever comes.
  // vLLM's extension: logprobs name tokens "token_id:N" instead of their
  // text (exact where pieces of a UTF-8 character or equal texts are not).
  bool return_tokens_as_token_ids = false;
  // Structured output: GBNF (worker/grammar/grammar.h) the answer must
  // match, from response_format, guided_*, llama.cpp's grammar and
  // json_schema, or the tool choice; empty: none.
  std::string grammar;
  // Chat's tools and tool_choice.
  ToolUse tools;
  // The body's fields that nothing read: unknown to this server, so
  // without effect (the server logs them, as vLLM does).
  std::vector<std::string> ignored_fields;
};

struct CompletionRequest {
  std::string model;
  // The prompts as text, or (OpenAI's other form) as token ids: one of the
  // two is filled.
  std::vector<std::string> prompts;
  std::vector<std::vector<int>> prompt_ids;
  GenerationParams params;
};

struct ChatRequest {
  std::string model;
  Dialog messages;
  GenerationParams params;
};

// Each returns false with `error` filled (400, naming the field) when the
// body is not valid JSON, a field has the wrong type or is out of range.
bool ParseCompletionRequest(const std::string& body, CompletionRequest* out, ApiError* error);
bool ParseChatRequest(const std::string& body, ChatRequest* out, ApiError* error);

// vLLM's POST /tokenize: a prompt (BOS first unless add_special_tokens is
// false) or chat messages and tools (the model's chat format, as the chat
// endpoint encodes them); and POST /detokenize: token ids back to text.
struct TokenizeRequest {
  std::string model;
  std::optional<std::string> prompt;
  Dialog messages;  // When there is no prompt.
  ToolUse tools;    // With messages.
  bool add_special_tokens = true;
};
struct DetokenizeRequest {
  std::string model;
  std::vector<int> tokens;
};
bool ParseTokenizeRequest(const std::string& body, TokenizeRequest* out, ApiError* error);
bool ParseDetokenizeRequest(const std::string& body, DetokenizeRequest* out, ApiError* error);

// A token's bytes as logprobs' token strings write them: the text where
// the bytes are whole UTF-8 characters; else (a piece of a character,
// which JSON cannot carry as text) "bytes:" and every byte as \xNN, OpenAI's
// form, which clients turn back into the bytes.
std::string TokenField(absl::string_view bytes);

// A token in logprobs: its name (TokenField of its bytes, or vLLM's
// "token_id:N"), its bytes as decoded in context (so that a choice's
// tokens join to its text) and log-probability.
struct LoggedToken {
  std::string token;
  std::string bytes;
  float logprob = 0.0f;  // NaN: none (the first prompt token).
};

// One token's place in a choice's logprobs.
struct TokenLogprob : LoggedToken {
  int64_t text_offset = 0;  // Where its bytes start in the choice's text.
  // With top_logprobs: the most likely tokens at its position, most likely
  // first, decoded in the same context; none at the first prompt token.
  std::vector<LoggedToken> top;
};

// One choice's result.
struct ChoiceResult {
  std::string text;
  std::string finish_reason;  // "stop", "length" or "tool_calls"; empty while streaming.
  // Chat: the answer was a call (then `text` is empty); sent as
  // message.tool_calls, or streamed whole in one delta.tool_calls.
  std::vector<ToolCall> tool_calls;
  // With logprobs: each token, in order.
  std::vector<TokenLogprob> logprobs;
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
};

// Whole responses.
nlohmann::json CompletionResponse(const std::string& id, int64_t created, const std::string& model,
                                  const std::vector<ChoiceResult>& choices, bool logprobs, const Usage& usage);
nlohmann::json ChatResponse(const std::string& id, int64_t created, const std::string& model,
                            const std::vector<ChoiceResult>& choices, bool logprobs, const Usage& usage);

// Streamed chunks: one choice's delta (text and its tokens' logprobs; a
// finish reason on the last), the chat's first chunk of a choice (role),
// and the usage chunk (no choices).
nlohmann::json CompletionChunk(const std::string& id, int64_t created, const std::string& model, int index,
                               const ChoiceResult& delta, bool logprobs);
nlohmann::json ChatChunk(const std::string& id, int64_t created, const std::string& model, int index,
                         const ChoiceResult& delta, bool logprobs, bool first);
nlohmann::json UsageChunk(const std::string& id, int64_t created, const std::string& model, const char* object,
                          const Usage& usage);

// GET /v1/models.
nlohmann::json ModelList(const std::string& model, int64_t created);

}  // namespace llama

#endif  // LLAMA_WORKER_SERVE_OPENAI_API_H_
