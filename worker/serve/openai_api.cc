#include "worker/serve/openai_api.h"

#include <cmath>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace llama {
namespace {

using nlohmann::json;

// Reads the fields of a request body, stopping at the first bad one.
class Fields {
 public:
  Fields(const json& body, ApiError* error) : body_(body), error_(error) {}

  bool ok() const { return ok_; }
  bool Has(const char* name) {
    seen_.insert(name);
    return body_.contains(name) && !body_[name].is_null();
  }
  // The body's fields that no parser looked at, in the body's order.
  std::vector<std::string> Unread() const {
    std::vector<std::string> unread;
    for (const auto& [name, value] : body_.items()) {
      if (!seen_.contains(name)) unread.push_back(name);
    }
    return unread;
  }
  const json& Get(const char* name) const { return body_[name]; }

  bool Fail(const std::string& param, const std::string& message) {
    if (ok_) *error_ = {400, absl::StrCat(param, ": ", message), "invalid_request_error", param, ""};
    ok_ = false;
    return false;
  }

  void String(const char* name, std::string* out, bool required) {
    if (!ok_) return;
    if (!Has(name)) {
      if (required) Fail(name, "required");
      return;
    }
    if (!Get(name).is_string()) return void(Fail(name, "expected a string"));
    *out = Get(name).get<std::string>();
  }
  void Bool(const char* name, bool* out) {
    if (!ok_ || !Has(name)) return;
    if (!Get(name).is_boolean()) return void(Fail(name, "expected true or false"));
    *out = Get(name).get<bool>();
  }
  // An integer in [lo, hi].
  template <typename T>
  void Integer(const char* name, T* out, int64_t lo, int64_t hi) {
    if (!ok_ || !Has(name)) return;
    const json& v = Get(name);
    if (!v.is_number_integer()) return void(Fail(name, "expected an integer"));
    const int64_t x = v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX ? INT64_MAX : v.get<int64_t>();
    if (x < lo || x > hi) return void(Fail(name, absl::StrFormat("%d is out of range [%d, %d]", x, lo, hi)));
    *out = static_cast<T>(x);
  }
  void Number(const char* name, float* out, double lo, double hi, bool open_low) {
    if (!ok_ || !Has(name)) return;
    const json& v = Get(name);
    if (!v.is_number()) return void(Fail(name, "expected a number"));
    const double x = v.get<double>();
    if (!std::isfinite(x) || x > hi || (open_low ? x <= lo : x < lo)) {
      return void(Fail(name, absl::StrFormat("%g is out of range %s%g, %g]", x, open_low ? "(" : "[", lo, hi)));
    }
    *out = static_cast<float>(x);
  }

 private:
  const json& body_;
  ApiError* error_;
  bool ok_ = true;
  absl::flat_hash_set<std::string> seen_;
};

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
  Fields f(body, error);
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
  f.Number("temperature", &p->temperature, 0, 2, /*open_low=*/false);
  f.Number("top_p", &p->top_p, 0, 1, /*open_low=*/true);
  f.Integer("n", &p->n, 1, 16);
  f.Integer("top_k", &p->top_k, -1, INT32_MAX);
  if (p->top_k == -1) p->top_k = 0;  // vLLM's "off".
  f.Number("min_p", &p->min_p, 0, 1, /*open_low=*/false);
  f.Integer("min_tokens", &p->min_tokens, 0, INT32_MAX);
  if (f.ok() && f.Has("stop_token_ids")) {
    const json& ids = f.Get("stop_token_ids");
    if (!IsTokenIds(ids)) return void(f.Fail("stop_token_ids", "expected an array of token ids"));
    p->stop_token_ids = ids.get<std::vector<int>>();
  }
}

void ParsePenalties(Fields& f, GenerationParams* p) {
  f.Number("presence_penalty", &p->presence_penalty, -2, 2, /*open_low=*/false);
  f.Number("frequency_penalty", &p->frequency_penalty, -2, 2, /*open_low=*/false);
  if (f.ok() && f.Has("logit_bias")) {
    const json& bias = f.Get("logit_bias");
    if (!bias.is_object()) return void(f.Fail("logit_bias", "expected an object of token ids to numbers"));
    for (const auto& [key, value] : bias.items()) {
      int token = -1;
      if (!absl::SimpleAtoi(key, &token) || token < 0) {
        return void(f.Fail("logit_bias", absl::StrFormat("key \"%s\": expected a token id", key)));
      }
      if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < -100 ||
          value.get<double>() > 100) {
        return void(f.Fail("logit_bias", absl::StrFormat("token %d: expected a number from -100 to 100", token)));
      }
      p->logit_bias.emplace_back(token, value.get<float>());
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
    p->seed = static_cast<uint64_t>(seed);
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
// values pass). Then the fields accepted and unused.
void RefuseUnsupported(Fields& f) {
  const std::pair<const char*, bool (*)(const json&)> unsupported[] = {
      {"response_format", [](const json& v) { return v.is_object() && v.contains("type") && v["type"] == "text"; }},
      {"tools", [](const json& v) { return v.is_array() && v.empty(); }},
      {"tool_choice", [](const json& v) { return v == "none"; }},
      {"functions", [](const json& v) { return v.is_array() && v.empty(); }},
      {"function_call", [](const json& v) { return v == "none"; }},
      {"suffix", [](const json& v) { return v == ""; }},
      {"best_of", [](const json& v) { return v == 1; }},
      {"repetition_penalty", [](const json& v) { return v == 1; }},
      {"guided_json", [](const json&) { return false; }},
      {"guided_regex", [](const json&) { return false; }},
      {"guided_choice", [](const json&) { return false; }},
      {"guided_grammar", [](const json&) { return false; }},
  };
  for (const auto& [name, neutral] : unsupported) {
    if (f.ok() && f.Has(name) && !neutral(f.Get(name))) f.Fail(name, "not supported by this server");
  }
  for (const char* name : {"user", "store", "metadata", "service_tier", "parallel_tool_calls", "stream_options"}) {
    f.Has(name);  // Accepted, unused (stream_options is read above).
  }
}

// The fields both endpoints share.
void ParseGeneration(Fields& f, GenerationParams* p) {
  ParseLengthAndSampling(f, p);
  ParsePenalties(f, p);
  ParseStop(f, p);
  ParseSeedAndStream(f, p);
  RefuseUnsupported(f);
  f.Bool("ignore_eos", &p->ignore_eos);
  f.Bool("return_tokens_as_token_ids", &p->return_tokens_as_token_ids);
}

// The alternatives at token i, with the chosen token among them (OpenAI's
// "up to logprobs + 1" entries); null where there are none.
json CompletionTop(const ChoiceResult& c, size_t i) {
  if (i >= c.top_logprobs.size() || c.top_logprobs[i].empty()) return nullptr;
  json top = json::object();
  for (const auto& [text, lp] : c.top_logprobs[i]) top[text] = lp;
  if (!std::isnan(c.token_logprobs[i])) top[c.tokens[i]] = c.token_logprobs[i];
  return top;
}

json CompletionLogprobs(const ChoiceResult& c) {
  json token_logprobs = json::array(), top = json::array();
  bool any_top = false;
  for (size_t i = 0; i < c.tokens.size(); ++i) {
    token_logprobs.push_back(std::isnan(c.token_logprobs[i]) ? json(nullptr) : json(c.token_logprobs[i]));
    top.push_back(CompletionTop(c, i));
    any_top |= !top.back().is_null();
  }
  return {{"tokens", c.tokens},
          {"token_logprobs", token_logprobs},
          {"top_logprobs", any_top ? top : json(nullptr)},
          {"text_offset", c.text_offsets}};
}

std::vector<int> Bytes(const std::string& text) {
  std::vector<int> bytes;
  for (char ch : text) bytes.push_back(static_cast<unsigned char>(ch));
  return bytes;
}

json ChatLogprobs(const ChoiceResult& c) {
  json content = json::array();
  for (size_t i = 0; i < c.tokens.size(); ++i) {
    json top = json::array();
    if (i < c.top_logprobs.size()) {
      for (const auto& [text, lp] : c.top_logprobs[i]) top.push_back({{"token", text}, {"logprob", lp}, {"bytes", Bytes(text)}});
    }
    content.push_back({{"token", c.tokens[i]}, {"logprob", c.token_logprobs[i]}, {"bytes", Bytes(c.tokens[i])},
                       {"top_logprobs", top}});
  }
  return {{"content", content}};
}

json UsageJson(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

// The chat messages of a body: roles, and text content (a string or text parts).
void ParseMessages(Fields& f, const json& body, Dialog* out) {
  if (f.ok()) {
    f.Has("messages");
    const json messages = body.value("messages", json());
    if (!messages.is_array() || messages.empty()) {
      f.Fail("messages", messages.is_null() ? "required" : "expected a non-empty array of messages");
    }
    for (size_t i = 0; f.ok() && i < messages.size(); ++i) {
      const std::string at = absl::StrCat("messages[", i, "]");
      const json& m = messages[i];
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
        f.Fail(at + ".role", "expected \"system\", \"user\" or \"assistant\"");
        break;
      }
      const std::string role = m["role"].get<std::string>();
      Message message;
      if (role == "system") {
        message.role = Role::kSystem;
      } else if (role == "user") {
        message.role = Role::kUser;
      } else if (role == "assistant") {
        message.role = Role::kAssistant;
      } else {
        f.Fail(at + ".role", absl::StrCat("\"", role, "\": expected \"system\", \"user\" or \"assistant\""));
        break;
      }
      const json content = m.value("content", json());
      if (content.is_string()) {
        message.content = content.get<std::string>();
      } else if (content.is_array()) {
        // Content parts: text only.
        for (const json& part : content) {
          if (!part.is_object() || !part.contains("type") || part["type"] != "text" ||
              !part.contains("text") || !part["text"].is_string()) {
            f.Fail(at + ".content", "expected a string or an array of {\"type\": \"text\", \"text\": ...} parts");
            break;
          }
          message.content += part["text"].get<std::string>();
        }
      } else {
        f.Fail(at + ".content", "expected a string");
      }
      out->push_back(std::move(message));
    }
  }
}

json FinishReason(const ChoiceResult& c) { return c.finish_reason.empty() ? json(nullptr) : json(c.finish_reason); }

}  // namespace

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
    ParseGeneration(f, &out->params);
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
    ParseMessages(f, body, &out->messages);
    ParseGeneration(f, &out->params);
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
      ParseMessages(f, body, &out->messages);
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
    list.push_back({{"index", i},
                    {"message", {{"role", "assistant"}, {"content", choices[i].text}}},
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
  d["content"] = delta.text;
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
