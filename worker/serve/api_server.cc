#include "worker/serve/api_server.h"

#include <glog/logging.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "tokenizer/chat_format.h"

namespace llama {
namespace {

// The first id of `ids` outside [0, vocab), as the error a request gets for it.
std::optional<ApiError> OutsideVocabulary(const char* param, absl::Span<const int> ids, int64_t vocab) {
  for (int id : ids) {
    if (id < 0 || id >= vocab) {
      return ApiError{400, absl::StrFormat("%s: token id %d outside the vocabulary [0, %d)", param, id, vocab),
                      "invalid_request_error", param, ""};
    }
  }
  return std::nullopt;
}

using nlohmann::json;

int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Equal strings, in a time that depends on their lengths only.
bool ConstantTimeEquals(const std::string& a, const std::string& b) {
  const size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    diff |= static_cast<unsigned char>((i < a.size() ? a[i] : 0) ^ (i < b.size() ? b[i] : 0));
  }
  return diff == 0;
}

std::string Sse(const json& data) { return absl::StrCat("data: ", data.dump(), "\n\n"); }

}  // namespace

ApiServer::ApiServer(EngineLoop* loop, const Tokenizer* tokenizer, int64_t context, ApiServerOptions options)
    : loop_(loop),
      tokenizer_(tokenizer),
      context_(context),
      options_(std::move(options)),
      created_(UnixSeconds()),
      server_(std::make_unique<httplib::Server>()) {}

ApiServer::~ApiServer() { Stop(); }

void ApiServer::Reply(httplib::Response& res, const ApiError& error) {
  res.status = error.status;
  res.set_content(error.Json(), "application/json");
}

bool ApiServer::Authorized(const httplib::Request& req) const {
  if (options_.api_keys.empty()) return true;
  const std::string header = req.get_header_value("Authorization");
  if (!absl::StartsWith(header, "Bearer ")) return false;
  const std::string key = header.substr(7);
  bool ok = false;
  for (const std::string& k : options_.api_keys) ok |= ConstantTimeEquals(key, k);
  return ok;
}

bool ApiServer::Admit(const httplib::Request& req, httplib::Response& res, const std::string& model) {
  if (!Authorized(req)) {
    metrics_.Failed("auth");
    Reply(res, {401, "a valid API key is required: Authorization: Bearer <key>", "invalid_request_error", "",
                "invalid_api_key"});
    return false;
  }
  const absl::Status engine = loop_->status();
  if (!ready_ || draining_ || !engine.ok()) {
    metrics_.Failed("unavailable");
    const std::string why = !ready_ ? "the model is loading" : draining_ ? "the server is shutting down"
                                                                          : absl::StrCat("the engine failed: ",
                                                                                         engine.message());
    Reply(res, {503, why, "server_error", "", ""});
    return false;
  }
  if (model != options_.model) {
    metrics_.Failed("invalid");
    Reply(res, {404, absl::StrFormat("the model `%s` does not exist; this server has `%s`", model, options_.model),
                "invalid_request_error", "model", "model_not_found"});
    return false;
  }
  return true;
}

void ApiServer::HandleTokenize(const httplib::Request& req, httplib::Response& res) {
  TokenizeRequest request;
  ApiError error;
  if (!ParseTokenizeRequest(req.body, &request, &error)) return Reply(res, error);
  if (!Admit(req, res, request.model)) return;
  std::vector<int> tokens;
  if (request.prompt.has_value()) {
    absl::StatusOr<std::vector<int>> ids = tokenizer_->Encode(*request.prompt, request.add_special_tokens, false);
    if (!ids.ok()) return Reply(res, {400, absl::StrCat("prompt: ", ids.status().message()), "invalid_request_error",
                                      "prompt", ""});
    tokens = *std::move(ids);
  } else {
    absl::StatusOr<ChatPrompt> prompt = EncodeDialog(*tokenizer_, request.messages);
    if (!prompt.ok()) return Reply(res, {400, absl::StrCat("messages: ", prompt.status().message()),
                                         "invalid_request_error", "messages", ""});
    tokens = prompt->tokens;
  }
  const json body = {{"tokens", tokens}, {"count", tokens.size()}, {"max_model_len", context_}};
  res.set_content(body.dump(), "application/json");
}

void ApiServer::HandleDetokenize(const httplib::Request& req, httplib::Response& res) {
  DetokenizeRequest request;
  ApiError error;
  if (!ParseDetokenizeRequest(req.body, &request, &error)) return Reply(res, error);
  if (!Admit(req, res, request.model)) return;
  if (std::optional<ApiError> outside = OutsideVocabulary("tokens", request.tokens, tokenizer_->vocab_size())) {
    return Reply(res, *outside);
  }
  absl::StatusOr<std::string> text = tokenizer_->Decode(request.tokens);
  if (!text.ok()) return Reply(res, {400, absl::StrCat("tokens: ", text.status().message()), "invalid_request_error",
                                     "tokens", ""});
  res.set_content(json{{"prompt", *text}}.dump(), "application/json");
}

void ApiServer::Track(const std::shared_ptr<ApiGeneration>& generation) {
  absl::MutexLock lock(&mutex_);
  active_.erase(std::remove_if(active_.begin(), active_.end(), [](const auto& g) { return g.expired(); }),
                active_.end());
  active_.push_back(generation);
}

void ApiServer::CancelAll() {
  absl::MutexLock lock(&mutex_);
  for (const auto& weak : active_) {
    if (std::shared_ptr<ApiGeneration> g = weak.lock()) g->Cancel();
  }
}

void ApiServer::HandleCompletions(const httplib::Request& req, httplib::Response& res, bool chat) {
  metrics_.RequestArrived();
  ApiError error;
  CompletionRequest completion;
  ChatRequest dialog;
  const bool parsed = chat ? ParseChatRequest(req.body, &dialog, &error)
                           : ParseCompletionRequest(req.body, &completion, &error);
  if (!parsed) {
    // A bad key is reported before a bad body.
    if (!Authorized(req)) {
      metrics_.Failed("auth");
      return Reply(res, {401, "a valid API key is required: Authorization: Bearer <key>", "invalid_request_error", "",
                         "invalid_api_key"});
    }
    metrics_.Failed("invalid");
    return Reply(res, error);
  }
  const GenerationParams& params = chat ? dialog.params : completion.params;
  if (!Admit(req, res, chat ? dialog.model : completion.model)) return;
  if (!params.ignored_fields.empty()) {
    LOG_FIRST_N(WARNING, 20) << req.path << ": fields this server does not know, without effect: "
                             << absl::StrJoin(params.ignored_fields, ", ");
  }
  std::vector<int> biased;
  for (const auto& [token, bias] : params.logit_bias) biased.push_back(token);
  for (const auto& [param, ids] : {std::pair<const char*, absl::Span<const int>>{"logit_bias", biased},
                                   {"stop_token_ids", params.stop_token_ids}}) {
    if (std::optional<ApiError> outside = OutsideVocabulary(param, ids, tokenizer_->vocab_size())) {
      metrics_.Failed("invalid");
      return Reply(res, *outside);
    }
  }

  // The prompts, checked against the context: never cut silently.
  std::vector<ChoicePlan> prompts;
  bool unsafe = false;
  if (chat) {
    absl::StatusOr<ChatPrompt> prompt = EncodeDialog(*tokenizer_, dialog.messages);
    if (!prompt.ok()) {
      metrics_.Failed("invalid");
      return Reply(res, {400, absl::StrCat("messages: ", prompt.status().message()), "invalid_request_error",
                         "messages", ""});
    }
    unsafe = prompt->unsafe;
    prompts.push_back({prompt->tokens, "", 0});
  } else {
    for (const std::string& text : completion.prompts) {
      absl::StatusOr<std::vector<int>> ids = tokenizer_->Encode(text, /*bos=*/true, /*eos=*/false);
      if (!ids.ok()) {
        metrics_.Failed("invalid");
        return Reply(res, {400, absl::StrCat("prompt: ", ids.status().message()), "invalid_request_error", "prompt",
                           ""});
      }
      prompts.push_back({*std::move(ids), text, 0});
    }
    // Token ids as given (no BOS added: the caller chose them).
    for (const std::vector<int>& ids : completion.prompt_ids) {
      if (std::optional<ApiError> outside = OutsideVocabulary("prompt", ids, tokenizer_->vocab_size())) {
        metrics_.Failed("invalid");
        return Reply(res, *outside);
      }
      absl::StatusOr<std::string> text = tokenizer_->Decode(ids);
      prompts.push_back({ids, text.ok() ? *text : std::string(), 0});
    }
  }
  for (ChoicePlan& p : prompts) {
    const int64_t length = static_cast<int64_t>(p.prompt_ids.size());
    p.max_tokens = params.max_tokens.value_or(chat ? std::max<int64_t>(0, context_ - length) : 16);
    if (length + p.max_tokens > context_) {
      metrics_.Failed("invalid");
      return Reply(res, {400,
                         absl::StrFormat("this model's context is %d tokens, but the prompt has %d tokens and "
                                         "max_tokens is %d (%d in all); shorten the prompt or lower max_tokens",
                                         context_, length, p.max_tokens, length + p.max_tokens),
                         "invalid_request_error", chat ? "messages" : "prompt", "context_length_exceeded"});
    }
    if (params.min_tokens > p.max_tokens) {
      metrics_.Failed("invalid");
      return Reply(res, {400, absl::StrFormat("min_tokens: %d is more than max_tokens (%d)", params.min_tokens,
                                              p.max_tokens),
                         "invalid_request_error", "min_tokens", ""});
    }
  }
  const std::string id = absl::StrFormat("%s-%x%x", chat ? "chatcmpl" : "cmpl", created_, next_id_++);
  const int64_t created = UnixSeconds();
  if (unsafe) {
    // The reference answers a dialog with special tags with this text.
    ChoiceResult answer;
    answer.text = std::string(kUnsafeRequestAnswer);
    answer.finish_reason = "stop";
    std::vector<ChoiceResult> answers(params.n, answer);
    const Usage usage{static_cast<int64_t>(prompts[0].prompt_ids.size()), 0};
    if (!params.stream) {
      return res.set_content(ChatResponse(id, created, options_.model, answers, params.logprobs, usage).dump(),
                             "application/json");
    }
    std::string body;
    for (int i = 0; i < params.n; ++i) body += Sse(ChatChunk(id, created, options_.model, i, answer, false, true));
    if (params.include_usage) body += Sse(UsageChunk(id, created, options_.model, "chat.completion.chunk", usage));
    return res.set_content(body + "data: [DONE]\n\n", "text/event-stream");
  }
  if (loop_->stats().waiting >= options_.max_queue) {
    metrics_.Failed("queue_full");
    res.set_header("Retry-After", "1");
    return Reply(res, {429, absl::StrFormat("%d requests are waiting already; retry later", options_.max_queue),
                       "rate_limit_error", "", "queue_full"});
  }
  // One request may not fill the queue by itself.
  constexpr size_t kMaxChoices = 256;
  if (prompts.size() * params.n > kMaxChoices) {
    metrics_.Failed("invalid");
    return Reply(res, {400,
                       absl::StrFormat("%d prompts x n = %d asks for %d completions; at most %d per request",
                                       prompts.size(), params.n, prompts.size() * params.n, kMaxChoices),
                       "invalid_request_error", "n", ""});
  }
  std::vector<ChoicePlan> plans;
  for (const ChoicePlan& p : prompts) plans.insert(plans.end(), params.n, p);
  auto generation = std::make_shared<ApiGeneration>(*tokenizer_, params, &metrics_);
  if (absl::Status s = generation->Start(*loop_, plans); !s.ok()) {
    metrics_.Failed("unavailable");
    return Reply(res, {503, std::string(s.message()), "server_error", "", ""});
  }
  Track(generation);

  if (!params.stream) {
    while (!generation->done()) generation->Next(absl::Milliseconds(100));
    if (!generation->error().ok()) {
      metrics_.Failed("engine");
      return Reply(res, {503, absl::StrCat("the engine failed: ", generation->error().message()), "server_error", "",
                         ""});
    }
    const json body = chat ? ChatResponse(id, created, options_.model, generation->Results(), params.logprobs,
                                          generation->usage())
                           : CompletionResponse(id, created, options_.model, generation->Results(), params.logprobs,
                                                generation->usage());
    return res.set_content(body.dump(), "application/json");
  }

  res.set_header("Cache-Control", "no-cache");
  const std::string model = options_.model;
  auto idle_polls = std::make_shared<int>(0);
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, generation, id, created, model, chat, params, idle_polls](size_t, httplib::DataSink& sink) {
        const std::vector<ApiGeneration::Delta> deltas = generation->Next(absl::Milliseconds(250));
        std::string out;
        for (const ApiGeneration::Delta& d : deltas) {
          out += Sse(chat ? ChatChunk(id, created, model, d.index, d.part, params.logprobs, d.first)
                          : CompletionChunk(id, created, model, d.index, d.part, params.logprobs));
        }
        // A comment now and then: a client that left is found by the write.
        if (deltas.empty() && ++*idle_polls % 8 == 0) out = ": keep-alive\n\n";
        if (generation->done()) {
          if (!generation->error().ok()) {
            metrics_.Failed("engine");
            out += Sse(json::parse(ApiError{503, absl::StrCat("the engine failed: ", generation->error().message()),
                                            "server_error", "", ""}
                                       .Json()));
          } else if (params.include_usage) {
            out += Sse(UsageChunk(id, created, model, chat ? "chat.completion.chunk" : "text_completion",
                                  generation->usage()));
          }
          out += "data: [DONE]\n\n";
        }
        if (!out.empty() && !sink.write(out.data(), out.size())) {
          metrics_.Failed("cancelled");
          generation->Cancel();
          return false;
        }
        if (generation->done()) sink.done();
        return true;
      },
      [generation](bool success) {
        if (!success) generation->Cancel();
      });
}

absl::Status ApiServer::Start() {
  httplib::Server& s = *server_;
  const int threads = options_.connection_threads;
  s.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.set_read_timeout(options_.read_timeout_seconds, 0);
  s.set_payload_max_length(options_.max_body_bytes);
  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const absl::Status engine = loop_->status();
    json body = {{"status", "ok"}};
    if (!ready_) {
      body["status"] = "loading";
    } else if (!engine.ok()) {
      body = {{"status", "error"}, {"message", std::string(engine.message())}};
    } else if (draining_) {
      body["status"] = "draining";
    }
    res.status = body["status"] == "ok" ? 200 : 503;
    res.set_content(body.dump(), "application/json");
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.Render(loop_->stats()), "text/plain; version=0.0.4");
  });
  s.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
    if (!Authorized(req)) {
      return Reply(res, {401, "a valid API key is required: Authorization: Bearer <key>", "invalid_request_error", "",
                         "invalid_api_key"});
    }
    res.set_content(ModelList(options_.model, created_).dump(), "application/json");
  });
  s.Post("/v1/completions",
         [this](const httplib::Request& req, httplib::Response& res) { HandleCompletions(req, res, false); });
  s.Post("/v1/chat/completions",
         [this](const httplib::Request& req, httplib::Response& res) { HandleCompletions(req, res, true); });
  s.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) { HandleTokenize(req, res); });
  s.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) { HandleDetokenize(req, res); });
  s.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;  // Ours already.
    if (res.status == 404) {
      return Reply(res, {404, absl::StrFormat("no route for %s %s", req.method, req.path), "invalid_request_error",
                         "", "not_found"});
    }
    if (res.status == 413) {
      return Reply(res, {413, absl::StrFormat("the body is larger than %d bytes", options_.max_body_bytes),
                         "invalid_request_error", "", "payload_too_large"});
    }
    Reply(res, {res.status, absl::StrFormat("bad request (HTTP %d)", res.status), "invalid_request_error", "", ""});
  });
  if (options_.port == 0) {
    port_ = s.bind_to_any_port(options_.host);
    if (port_ <= 0) return absl::UnavailableError(absl::StrFormat("cannot listen on %s (any port)", options_.host));
  } else {
    if (!s.bind_to_port(options_.host, options_.port)) {
      return absl::UnavailableError(absl::StrFormat(
          "cannot listen on %s:%d (in use, or not an address of this host): pick another --port or --host",
          options_.host, options_.port));
    }
    port_ = options_.port;
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  return absl::OkStatus();
}

void ApiServer::Stop() {
  if (!thread_.joinable()) return;
  server_->stop();
  thread_.join();
}

}  // namespace llama
