#include "worker/serve/openai_api.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tokenizer/utf8.h"
#include "worker/serve/request_fields.h"

namespace llama {
namespace internal_openai {

bool ParseOrderedJson(absl::string_view text, absl::Span<const char* const> top_level, ordered_json* out,
                      std::string* error) {
  constexpr int kMaxKeys = 8192;  // At most ~3e7 key comparisons.
  int keys = 0;
  bool keep = true;
  const auto callback = [&](int depth, ordered_json::parse_event_t event, ordered_json& parsed) {
    if (event != ordered_json::parse_event_t::key) return true;
    if (depth == 1 && !top_level.empty()) {
      keep = std::find(top_level.begin(), top_level.end(), parsed.get<std::string>()) != top_level.end();
      if (!keep) return false;  // Not kept: the member is skipped.
    }
    return keep && ++keys <= kMaxKeys;
  };
  *out = ordered_json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/false);
  if (out->is_discarded()) {
    *error = "not valid JSON";
    return false;
  }
  if (keys > kMaxKeys) {
    *error = absl::StrFormat("more than %d object keys", kMaxKeys);
    return false;
  }
  return true;
}

}  // namespace internal_openai

namespace {

using internal_openai::Fields;
using internal_openai::ordered_json;
using nlohmann::json;

// An integer that an int holds: token ids outside it would wrap into
// valid-looking ones when read as int.
bool IsInt32(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>() <= INT32_MAX;
  return v.is_number_integer() && v.get<int64_t>() >= INT32_MIN && v.get<int64_t>() <= INT32_MAX;
}

// An array of token ids (the server checks them against the vocabulary).
bool IsTokenIds(const json& v) { return v.is_array() && std::all_of(v.begin(), v.end(), IsInt32); }

bool ParseBody(const std::string& text, json* body, ApiError* error) {
  *body = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body->is_discarded()) {
    *error = {400, "the body is not valid JSON", "invalid_request_error", "", ""};
    return false;
  }
  if (!body->is_object()) {
    *error = {400, "the body must be a JSON object", "invalid_request_error", "", ""};
    return false;
  }
  return true;
}

// A request body: a JSON object with a "model", then what `read` reads.
template <typename Request, typename Read>
bool ParseRequest(const std::string& text, Request* out, ApiError* error, Read read) {
  json body;
  if (!ParseBody(text, &body, error)) return false;
  ordered_json ordered = ordered_json::object();
  std::string why;
  if (std::any_of(std::begin(internal_openai::kOrderedFields), std::end(internal_openai::kOrderedFields),
                  [&](const char* name) { return body.contains(name); }) &&
      !internal_openai::ParseOrderedJson(text, internal_openai::kOrderedFields, &ordered, &why)) {
    *error = {400, absl::StrCat("response_format, guided_json, json_schema and tools: ", why), "invalid_request_error",
              "", ""};
    return false;
  }
  Fields f(body, ordered, error);
  f.String("model", &out->model, /*required=*/true);
  read(f, body);
  return f.ok();
}

// The steps of ParseGeneration, in the order the fields are read. After a
// failure the steps that follow read nothing (Fields stops at the first bad
// field), so the error names the first bad field.

void ParseLengthAndSampling(Fields& f, GenerationParams* p) {
  if (f.Has("max_tokens")) {
    int64_t max_tokens = 0;
    f.Integer("max_tokens", &max_tokens, 0, INT32_MAX);
    p->max_tokens = max_tokens;
  }
  TokenSampling& token = p->sampling.token;
  f.Number(kTemperatureRange, &token.temperature);
  f.Number(kTopPRange, &token.top_p);
  f.Integer("n", &p->n, 1, 16);
  f.Integer(kTopKRange.name, &token.top_k, -1, static_cast<int64_t>(kTopKRange.hi));  // -1: vLLM's "off".
  if (token.top_k == -1) token.top_k = 0;
  f.Number(kMinPRange, &token.min_p);
  f.Number(kTypicalPRange, &token.typical_p);  // llama.cpp's.
  f.Integer("min_tokens", &p->min_tokens, 0, INT32_MAX);
  if (f.ok() && f.Has("stop_token_ids")) {
    const json& ids = f.Get("stop_token_ids");
    if (!IsTokenIds(ids)) return void(f.Fail("stop_token_ids", "expected an array of token ids"));
    p->stop_token_ids = ids.get<std::vector<int>>();
  }
}

void ParsePenalties(Fields& f, GenerationParams* p) {
  f.Number(kPresencePenaltyRange, &p->sampling.presence_penalty);
  f.Number(kFrequencyPenaltyRange, &p->sampling.frequency_penalty);
  if (f.ok() && f.Has("logit_bias")) {
    const json& bias = f.Get("logit_bias");
    if (!bias.is_object()) return void(f.Fail("logit_bias", "expected an object of token ids to numbers"));
    for (const auto& [key, value] : bias.items()) {
      int token = -1;
      if (!absl::SimpleAtoi(key, &token) || token < 0) {
        return void(f.Fail("logit_bias", absl::StrFormat("key \"%s\": expected a token id", key)));
      }
      if (!value.is_number() || !kLogitBiasRange.Contains(value.get<double>())) {
        return void(f.Fail("logit_bias", absl::StrFormat("token %d: expected a number from %g to %g", token,
                                                         kLogitBiasRange.lo, kLogitBiasRange.hi)));
      }
      p->sampling.logit_bias.push_back({token, value.get<float>()});
    }
  }
}

void ParseStop(Fields& f, GenerationParams* p) {
  if (!f.ok() || !f.Has("stop")) return;
  const json& stop = f.Get("stop");
  if (stop.is_string()) {
    p->stop = {stop.get<std::string>()};
  } else if (stop.is_array() && stop.size() <= 4) {
    for (const json& s : stop) {
      if (!s.is_string()) return void(f.Fail("stop", "expected a string or an array of up to 4 strings"));
      p->stop.push_back(s.get<std::string>());
    }
  } else {
    return void(f.Fail("stop", "expected a string or an array of up to 4 strings"));
  }
  for (const std::string& s : p->stop) {
    if (s.empty()) return void(f.Fail("stop", "an empty stop string"));
  }
}

void ParseSeedAndStream(Fields& f, GenerationParams* p) {
  if (f.Has("seed")) {
    int64_t seed = 0;
    f.Integer("seed", &seed, INT64_MIN, INT64_MAX);
    p->sampling.seed = static_cast<uint64_t>(seed);
    p->seeded = true;
  }
  f.Bool("stream", &p->stream);
  if (f.ok() && f.Has("stream_options")) {
    const json& options = f.Get("stream_options");
    if (!options.is_object()) return void(f.Fail("stream_options", "expected an object"));
    if (!p->stream) return void(f.Fail("stream_options", "only allowed with \"stream\": true"));
    if (options.contains("include_usage")) {
      if (!options["include_usage"].is_boolean()) {
        return void(f.Fail("stream_options.include_usage", "expected true or false"));
      }
      p->include_usage = options["include_usage"].get<bool>();
    }
  }
}

// Fields that other servers honour and that change what comes back: an
// error rather than an answer that silently ignores them (their neutral
// values pass). Then the fields accepted and unused. Tools are chat's
// (ParseTools): completions refuse them.
void RefuseUnsupported(Fields& f, bool chat) {
  if (!chat) {
    for (const char* name : {"tools", "tool_choice"}) {
      const bool neutral = f.Has(name) && (f.Get(name) == json::array() || f.Get(name) == "none");
      if (f.ok() && f.Has(name) && !neutral) f.Fail(name, "only chat completions take tools");
    }
  }
  const std::pair<const char*, bool (*)(const json&)> unsupported[] = {
      {"functions", [](const json& v) { return v.is_array() && v.empty(); }},
      {"function_call", [](const json& v) { return v == "none"; }},
      {"suffix", [](const json& v) { return v == ""; }},
      {"best_of", [](const json& v) { return v == 1; }},
      {"repetition_penalty", [](const json& v) { return v == 1; }},
  };
  for (const auto& [name, neutral] : unsupported) {
    if (f.ok() && f.Has(name) && !neutral(f.Get(name))) f.Fail(name, "not supported by this server");
  }
  for (const char* name : {"user", "store", "metadata", "service_tier", "parallel_tool_calls", "stream_options"}) {
    f.Has(name);  // Accepted, unused (stream_options is read above).
  }
}

// The fields both endpoints share; returns the field that constrains the
// answer (ParseStructuredOutput's), or null.
const char* ParseGeneration(Fields& f, bool chat, GenerationParams* p) {
  ParseLengthAndSampling(f, p);
  ParsePenalties(f, p);
  ParseStop(f, p);
  ParseSeedAndStream(f, p);
  const char* constrained_by = internal_openai::ParseStructuredOutput(f, p);
  RefuseUnsupported(f, chat);
  f.Bool("ignore_eos", &p->ignore_eos);
  f.Bool("return_tokens_as_token_ids", &p->return_tokens_as_token_ids);
  return constrained_by;
}

// The alternatives at a token, with the token itself among them (OpenAI's
// and vLLM's "up to logprobs + 1" entries; logprobs 0: the token alone);
// null at the first prompt token, which nothing predicts.
json CompletionTop(const TokenLogprob& t) {
  if (std::isnan(t.logprob)) return nullptr;
  json top = json::object();
  for (const LoggedToken& alternative : t.top) top[alternative.token] = alternative.logprob;
  top[t.token] = t.logprob;
  return top;
}

json CompletionLogprobs(const ChoiceResult& c) {
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(), offsets = json::array();
  for (const TokenLogprob& t : c.logprobs) {
    tokens.push_back(t.token);
    token_logprobs.push_back(std::isnan(t.logprob) ? json(nullptr) : json(t.logprob));
    top.push_back(CompletionTop(t));
    offsets.push_back(t.text_offset);
  }
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top}, {"text_offset", offsets}};
}

json ChatToken(const LoggedToken& t) {
  std::vector<int> bytes;
  for (char ch : t.bytes) bytes.push_back(static_cast<unsigned char>(ch));
  return {{"token", t.token}, {"logprob", t.logprob}, {"bytes", bytes}};
}

json ChatLogprobs(const ChoiceResult& c) {
  json content = json::array();
  for (const TokenLogprob& t : c.logprobs) {
    json entry = ChatToken(t);
    entry["top_logprobs"] = json::array();
    for (const LoggedToken& alternative : t.top) entry["top_logprobs"].push_back(ChatToken(alternative));
    content.push_back(std::move(entry));
  }
  return {{"content", content}};
}

json UsageJson(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

json FinishReason(const ChoiceResult& c) { return c.finish_reason.empty() ? json(nullptr) : json(c.finish_reason); }

// OpenAI's tool_calls; a stream's carry their index among the choice's calls.
json ToolCallsJson(const std::vector<ToolCall>& calls, bool streamed) {
  json list = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json call = {{"id", calls[i].id},
                 {"type", "function"},
                 {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (streamed) call["index"] = i;
    list.push_back(std::move(call));
  }
  return list;
}

// A chat message or delta: text, or (content null) the calls.
void SetContent(const ChoiceResult& c, bool streamed, json* message) {
  if (c.tool_calls.empty()) {
    (*message)["content"] = c.text;
  } else {
    (*message)["content"] = nullptr;
    (*message)["tool_calls"] = ToolCallsJson(c.tool_calls, streamed);
  }
}

}  // namespace

std::string TokenField(absl::string_view bytes) {
  if (SanitizeUtf8(bytes) == bytes) return std::string(bytes);
  std::string field = "bytes:";
  for (const char byte : bytes) absl::StrAppendFormat(&field, "\\x%02x", static_cast<unsigned char>(byte));
  return field;
}

std::string ApiError::Json() const {
  return json{{"error",
               {{"message", message},
                {"type", type},
                {"param", param.empty() ? json(nullptr) : json(param)},
                {"code", code.empty() ? json(nullptr) : json(code)}}}}
      .dump();
}

bool ParseCompletionRequest(const std::string& text, CompletionRequest* out, ApiError* error) {
  return ParseRequest(text, out, error, [&](Fields& f, const json& body) {
    if (f.ok()) {
      f.Has("prompt");
      const json prompt = body.value("prompt", json());
      const auto ids = [](const json& p) { return !p.empty() && IsTokenIds(p); };
      if (prompt.is_string()) {
        out->prompts = {prompt.get<std::string>()};
      } else if (prompt.is_array() && !prompt.empty() &&
                 std::all_of(prompt.begin(), prompt.end(), [](const json& p) { return p.is_string(); })) {
        for (const json& p : prompt) out->prompts.push_back(p.get<std::string>());
      } else if (ids(prompt)) {
        out->prompt_ids = {prompt.get<std::vector<int>>()};
      } else if (prompt.is_array() && !prompt.empty() && std::all_of(prompt.begin(), prompt.end(), ids)) {
        for (const json& p : prompt) out->prompt_ids.push_back(p.get<std::vector<int>>());
      } else {
        f.Fail("prompt", prompt.is_null() ? "required"
                                          : "expected a string, an array of strings, an array of token ids, or an "
                                            "array of those");
      }
    }
    ParseGeneration(f, /*chat=*/false, &out->params);
    if (f.ok() && f.Has("logprobs")) {
      f.Integer("logprobs", &out->params.top_logprobs, 0, 5);
      out->params.logprobs = true;
    }
    f.Bool("echo", &out->params.echo);
    out->params.ignored_fields = f.Unread();
  });
}

bool ParseChatRequest(const std::string& text, ChatRequest* out, ApiError* error) {
  return ParseRequest(text, out, error, [&](Fields& f, const json& body) {
    internal_openai::ParseMessages(f, body, &out->messages);
    const char* constrained_by = ParseGeneration(f, /*chat=*/true, &out->params);
    internal_openai::ParseTools(f, constrained_by, &out->params);
    // OpenAI's current name for chat's max_tokens (its clients send it).
    if (f.ok() && f.Has("max_completion_tokens")) {
      int64_t max_completion_tokens = 0;
      f.Integer("max_completion_tokens", &max_completion_tokens, 0, INT32_MAX);
      if (f.ok() && out->params.max_tokens.has_value() && *out->params.max_tokens != max_completion_tokens) {
        f.Fail("max_completion_tokens", "differs from max_tokens: give one of the two");
      }
      out->params.max_tokens = max_completion_tokens;
    }
    f.Bool("logprobs", &out->params.logprobs);
    f.Integer("top_logprobs", &out->params.top_logprobs, 0, 5);
    if (f.ok() && out->params.top_logprobs > 0 && !out->params.logprobs) {
      f.Fail("top_logprobs", "needs \"logprobs\": true");
    }
    out->params.ignored_fields = f.Unread();
  });
}

bool ParseTokenizeRequest(const std::string& text, TokenizeRequest* out, ApiError* error) {
  return ParseRequest(text, out, error, [&](Fields& f, const json& body) {
    if (f.ok() && f.Has("prompt")) {
      std::string prompt;
      f.String("prompt", &prompt, /*required=*/true);
      out->prompt = prompt;
    } else {
      internal_openai::ParseMessages(f, body, &out->messages);
      GenerationParams with_tools;
      internal_openai::ParseTools(f, /*constrained_by=*/nullptr, &with_tools);
      out->tools = std::move(with_tools.tools);
    }
    f.Bool("add_special_tokens", &out->add_special_tokens);
  });
}

bool ParseDetokenizeRequest(const std::string& text, DetokenizeRequest* out, ApiError* error) {
  return ParseRequest(text, out, error, [&](Fields& f, const json& body) {
    if (!f.ok()) return;
    if (!f.Has("tokens")) return void(f.Fail("tokens", "required"));
    if (!IsTokenIds(f.Get("tokens"))) return void(f.Fail("tokens", "expected an array of token ids"));
    out->tokens = f.Get("tokens").get<std::vector<int>>();
  });
}

json CompletionResponse(const std::string& id, int64_t created, const std::string& model,
                        const std::vector<ChoiceResult>& choices, bool logprobs, const Usage& usage) {
  json list = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    list.push_back({{"index", i},
                    {"text", choices[i].text},
                    {"logprobs", logprobs ? CompletionLogprobs(choices[i]) : json(nullptr)},
                    {"finish_reason", FinishReason(choices[i])}});
  }
  return {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", model},
          {"choices", list}, {"usage", UsageJson(usage)}};
}

json ChatResponse(const std::string& id, int64_t created, const std::string& model,
                  const std::vector<ChoiceResult>& choices, bool logprobs, const Usage& usage) {
  json list = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    json message = {{"role", "assistant"}};
    SetContent(choices[i], /*streamed=*/false, &message);
    list.push_back({{"index", i},
                    {"message", std::move(message)},
                    {"logprobs", logprobs ? ChatLogprobs(choices[i]) : json(nullptr)},
                    {"finish_reason", FinishReason(choices[i])}});
  }
  return {{"id", id}, {"object", "chat.completion"}, {"created", created}, {"model", model},
          {"choices", list}, {"usage", UsageJson(usage)}};
}

json CompletionChunk(const std::string& id, int64_t created, const std::string& model, int index,
                     const ChoiceResult& delta, bool logprobs) {
  json choice = {{"index", index},
                 {"text", delta.text},
                 {"logprobs", logprobs ? CompletionLogprobs(delta) : json(nullptr)},
                 {"finish_reason", FinishReason(delta)}};
  return {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", model},
          {"choices", json::array({choice})}};
}

json ChatChunk(const std::string& id, int64_t created, const std::string& model, int index, const ChoiceResult& delta,
               bool logprobs, bool first) {
  json d = json::object();
  if (first) d["role"] = "assistant";
  SetContent(delta, /*streamed=*/true, &d);
  json choice = {{"index", index},
                 {"delta", d},
                 {"logprobs", logprobs ? ChatLogprobs(delta) : json(nullptr)},
                 {"finish_reason", FinishReason(delta)}};
  return {{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", model},
          {"choices", json::array({choice})}};
}

json UsageChunk(const std::string& id, int64_t created, const std::string& model, const char* object,
                const Usage& usage) {
  return {{"id", id}, {"object", object}, {"created", created}, {"model", model}, {"choices", json::array()},
          {"usage", UsageJson(usage)}};
}

json ModelList(const std::string& model, int64_t created) {
  return {{"object", "list"},
          {"data", json::array({{{"id", model}, {"object", "model"}, {"created", created}, {"owned_by", "llama2-cpp"}}})}};
}

}  // namespace llama
