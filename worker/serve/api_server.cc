#include "worker/serve/api_server.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "tokenizer/chat_format.h"
#include "worker/net/net.h"

namespace llama {
namespace {

using nlohmann::json;

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

int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string Sse(const json& data) { return absl::StrCat("data: ", data.dump(), "\n\n"); }

http::Response JsonResponse(int status, std::string body, http::Headers headers = {}) {
  return {status, "application/json", std::move(body), std::move(headers)};
}

http::Response ErrorResponse(const ApiError& error) {
  http::Headers headers;
  if (error.status == 429 || error.status == 503) headers.emplace_back("Retry-After", "1");
  return JsonResponse(error.status, error.Json(), std::move(headers));
}

void Reply(const std::shared_ptr<http::Exchange>& exchange, const ApiError& error) {
  exchange->Respond(ErrorResponse(error));
}

// The most bytes of text one token can stand for: a prompt longer than the
// context times this cannot fit, and is refused before it is tokenized.
size_t MaxTokenBytes(const Tokenizer& tokenizer) {
  size_t most = 1;
  for (int id = 0; id < tokenizer.vocab_size(); ++id) {
    // A SentencePiece piece's text spells a space as U+2581 (3 bytes), so
    // its length is at least that of the text it encodes.
    most = std::max(most, tokenizer.family() == Tokenizer::Family::kTiktoken ? tokenizer.TokenBytes(id).size()
                                                                              : tokenizer.GetPiece(id).text.size());
  }
  return most;
}

// Request text as it may appear in a log line: no line breaks, no
// terminal escapes.
std::string Loggable(const std::vector<std::string>& texts) {
  std::vector<std::string> escaped;
  for (const std::string& text : texts) escaped.push_back(absl::CHexEscape(text.substr(0, 200)));
  return absl::StrJoin(escaped, ", ");
}

}  // namespace

// One generation request from admission to its last byte. The engine's
// events wake it (ApiGeneration's listener); a pump on the server's worker
// threads turns them into SSE chunks or, once done, into the one answer.
// Held by the server's table of calls until its answer is complete.
class ApiServer::Call : public std::enable_shared_from_this<Call> {
 public:
  Call(ApiServer* server, std::shared_ptr<http::Exchange> exchange, std::shared_ptr<ApiGeneration> generation,
       std::string id, bool chat, GenerationParams params)
      : server_(server),
        exchange_(std::move(exchange)),
        generation_(std::move(generation)),
        id_(std::move(id)),
        created_(UnixSeconds()),
        chat_(chat),
        params_(std::move(params)) {}

  ApiGeneration& generation() { return *generation_; }

  // Runs Pump on a worker thread, at most one at a time; wake-ups that come
  // while it runs make it go round again.
  void Wake() {
    if (!armed_) return;  // Until every choice is submitted; Arm wakes it then.
    if (pending_.fetch_add(1) == 0) server_->http_.Post([self = shared_from_this()] { self->Pump(); });
  }
  void Arm() {
    armed_ = true;
    Wake();
  }

  void ClientGone() {
    server_->metrics_.Failed("cancelled");
    generation_->Cancel(absl::CancelledError("the client went away"));
  }

 private:
  void Pump() {
    for (int seen = pending_.load();; seen = pending_.load()) {
      Drain();
      if (pending_.fetch_sub(seen) == seen) return;
    }
  }

  void Drain() {
    if (answered_) return;
    const std::vector<ApiGeneration::Delta> deltas = generation_->Next(absl::ZeroDuration());
    if (!released_ && (generation_->all_scheduled() || generation_->done())) {
      released_ = true;
      server_->waiting_requests_.fetch_sub(1);
    }
    const std::string& model = server_->options_.model;
    const absl::Status& failure = generation_->failure();
    if (params_.stream) {
      // The head goes from here, so that it leaves before any chunk.
      if (!stream_started_) exchange_->StartStream(200, "text/event-stream", {{"Cache-Control", "no-cache"}});
      stream_started_ = true;
      std::string out;
      for (const ApiGeneration::Delta& d : deltas) {
        out += Sse(chat_ ? ChatChunk(id_, created_, model, d.index, d.part, params_.logprobs, d.first)
                         : CompletionChunk(id_, created_, model, d.index, d.part, params_.logprobs));
      }
      if (generation_->done()) {
        if (!failure.ok()) {
          out += Sse(json::parse(FailureError(failure).Json()));
        } else if (params_.include_usage) {
          out += Sse(UsageChunk(id_, created_, model, chat_ ? "chat.completion.chunk" : "text_completion",
                                generation_->usage()));
        }
        out += "data: [DONE]\n\n";
      }
      exchange_->Send(std::move(out));
      if (generation_->done()) {
        exchange_->End();
        Finish(failure);
      }
      return;
    }
    if (!generation_->done()) return;
    if (!failure.ok()) {
      Reply(exchange_, FailureError(failure));
    } else {
      const json body = chat_ ? ChatResponse(id_, created_, model, generation_->Results(), params_.logprobs,
                                             generation_->usage())
                              : CompletionResponse(id_, created_, model, generation_->Results(), params_.logprobs,
                                                   generation_->usage());
      exchange_->Respond(JsonResponse(200, body.dump()));
    }
    Finish(failure);
  }

  // Cut answers are errors: 503 whether a rank failed or the drain
  // deadline passed (both are the server's state, not the request's fault).
  static ApiError FailureError(const absl::Status& failure) {
    return {503, std::string(failure.message()), "server_error", "",
            absl::IsCancelled(failure) ? "cancelled" : "engine_failed"};
  }

  void Finish(const absl::Status& failure) {
    answered_ = true;
    if (!failure.ok() && !exchange_->client_gone()) {
      server_->metrics_.Failed(absl::IsCancelled(failure) ? "cancelled" : "engine");
    }
    server_->Finished(this);
  }

  ApiServer* server_;
  std::shared_ptr<http::Exchange> exchange_;
  std::shared_ptr<ApiGeneration> generation_;
  const std::string id_;
  const int64_t created_;
  const bool chat_;
  const GenerationParams params_;
  std::atomic<bool> armed_{false};
  std::atomic<int> pending_{0};
  // Touched by the one running Pump only.
  bool released_ = false;  // Its place in the queue given back.
  bool stream_started_ = false;
  bool answered_ = false;
};

ApiServer::ApiServer(EngineLoop* loop, const Tokenizer* tokenizer, int64_t context, ApiServerOptions options)
    : loop_(loop),
      tokenizer_(tokenizer),
      context_(context),
      options_(std::move(options)),
      created_(UnixSeconds()),
      max_token_bytes_(MaxTokenBytes(*tokenizer)),
      http_([this] {
        http::ServerOptions o;
        o.host = options_.host;
        o.port = options_.port;
        o.io_threads = options_.io_threads;
        o.worker_threads = options_.worker_threads;
        o.limits = options_.limits;
        o.error_response = [](int status, const std::string& message, const std::string& code) {
          return ErrorResponse({status, message, status >= 500 ? "server_error" : "invalid_request_error", "", code});
        };
        return o;
      }()) {}

ApiServer::~ApiServer() { Stop(); }

std::optional<http::Response> ApiServer::CheckKey(const http::Request& head) {
  if (options_.api_keys.empty()) return std::nullopt;
  absl::string_view key = head.Header("Authorization");
  if (absl::ConsumePrefix(&key, "Bearer ")) {
    bool ok = false;
    for (const std::string& k : options_.api_keys) ok |= net::ConstantTimeEquals(key, k);
    if (ok) return std::nullopt;
  }
  metrics_.Failed("auth");
  return ErrorResponse({401, "a valid API key is required: Authorization: Bearer <key>", "invalid_request_error", "",
                        "invalid_api_key"});
}

std::optional<ApiError> ApiServer::Admit(const std::string& model) {
  const absl::Status engine = loop_->status();
  if (!ready_ || draining_ || !engine.ok()) {
    metrics_.Failed("unavailable");
    const std::string why = !ready_ ? "the model is loading" : draining_ ? "the server is shutting down"
                                                                          : absl::StrCat("the engine failed: ",
                                                                                         engine.message());
    return ApiError{503, why, "server_error", "", ""};
  }
  if (model != options_.model) {
    metrics_.Failed("invalid");
    return ApiError{404, absl::StrFormat("the model `%s` does not exist; this server has `%s`", model, options_.model),
                    "invalid_request_error", "model", "model_not_found"};
  }
  return std::nullopt;
}

std::optional<ApiError> ApiServer::CheckPromptBytes(size_t bytes, const char* param) const {
  const size_t most = static_cast<size_t>(context_) * max_token_bytes_;
  if (bytes <= most) return std::nullopt;
  return ApiError{400,
                  absl::StrFormat("%s: %d bytes of text cannot fit in this model's context of %d tokens (no token "
                                  "stands for more than %d bytes); shorten it",
                                  param, bytes, context_, max_token_bytes_),
                  "invalid_request_error", param, "context_length_exceeded"};
}

void ApiServer::HandleTokenize(const std::shared_ptr<http::Exchange>& exchange) {
  TokenizeRequest request;
  ApiError error;
  if (!ParseTokenizeRequest(exchange->request().body, &request, &error)) return Reply(exchange, error);
  if (std::optional<ApiError> refused = Admit(request.model)) return Reply(exchange, *refused);
  std::vector<int> tokens;
  if (request.prompt.has_value()) {
    if (std::optional<ApiError> long_text = CheckPromptBytes(request.prompt->size(), "prompt")) {
      return Reply(exchange, *long_text);
    }
    absl::StatusOr<std::vector<int>> ids = tokenizer_->Encode(*request.prompt, request.add_special_tokens, false);
    if (!ids.ok()) {
      return Reply(exchange, {400, absl::StrCat("prompt: ", ids.status().message()), "invalid_request_error",
                              "prompt", ""});
    }
    tokens = *std::move(ids);
  } else {
    size_t bytes = 0;
    for (const Message& m : request.messages) bytes += m.content.size();
    if (std::optional<ApiError> long_text = CheckPromptBytes(bytes, "messages")) return Reply(exchange, *long_text);
    absl::StatusOr<ChatPrompt> prompt = EncodeDialog(*tokenizer_, request.messages);
    if (!prompt.ok()) {
      return Reply(exchange, {400, absl::StrCat("messages: ", prompt.status().message()), "invalid_request_error",
                              "messages", ""});
    }
    tokens = prompt->tokens;
  }
  const json body = {{"tokens", tokens}, {"count", tokens.size()}, {"max_model_len", context_}};
  exchange->Respond(JsonResponse(200, body.dump()));
}

void ApiServer::HandleDetokenize(const std::shared_ptr<http::Exchange>& exchange) {
  DetokenizeRequest request;
  ApiError error;
  if (!ParseDetokenizeRequest(exchange->request().body, &request, &error)) return Reply(exchange, error);
  if (std::optional<ApiError> refused = Admit(request.model)) return Reply(exchange, *refused);
  if (std::optional<ApiError> outside = OutsideVocabulary("tokens", request.tokens, tokenizer_->vocab_size())) {
    return Reply(exchange, *outside);
  }
  absl::StatusOr<std::string> text = tokenizer_->Decode(request.tokens);
  if (!text.ok()) {
    return Reply(exchange, {400, absl::StrCat("tokens: ", text.status().message()), "invalid_request_error",
                            "tokens", ""});
  }
  exchange->Respond(JsonResponse(200, json{{"prompt", *text}}.dump()));
}

void ApiServer::Finished(Call* call) {
  absl::MutexLock lock(&mutex_);
  calls_.erase(call);
}

void ApiServer::CancelAll() {
  std::vector<std::shared_ptr<Call>> calls;
  {
    absl::MutexLock lock(&mutex_);
    for (const auto& [raw, call] : calls_) calls.push_back(call);
  }
  for (const std::shared_ptr<Call>& call : calls) {
    call->generation().Cancel(
        absl::CancelledError("the request was cancelled: the server is shutting down and its drain time ran out"));
  }
}

void ApiServer::HandleCompletions(const std::shared_ptr<http::Exchange>& exchange, bool chat) {
  const std::string& raw = exchange->request().body;
  const auto fail = [&](const char* reason, const ApiError& error) {
    metrics_.Failed(reason);
    Reply(exchange, error);
  };
  ApiError error;
  CompletionRequest completion;
  ChatRequest dialog;
  const bool parsed = chat ? ParseChatRequest(raw, &dialog, &error) : ParseCompletionRequest(raw, &completion, &error);
  if (!parsed) return fail("invalid", error);
  const GenerationParams& params = chat ? dialog.params : completion.params;
  if (std::optional<ApiError> refused = Admit(chat ? dialog.model : completion.model)) {
    return Reply(exchange, *refused);
  }
  if (!params.ignored_fields.empty()) {
    LOG_FIRST_N(WARNING, 20) << exchange->request().path << ": fields this server does not know, without effect: "
                             << Loggable(params.ignored_fields);
  }
  std::vector<int> biased;
  for (const auto& [token, bias] : params.logit_bias) biased.push_back(token);
  for (const auto& [param, ids] : {std::pair<const char*, absl::Span<const int>>{"logit_bias", biased},
                                   {"stop_token_ids", params.stop_token_ids}}) {
    if (std::optional<ApiError> outside = OutsideVocabulary(param, ids, tokenizer_->vocab_size())) {
      return fail("invalid", *outside);
    }
  }

  // The prompts, checked against the context: never cut silently. Text
  // that cannot fit is refused before it is tokenized.
  std::vector<ChoicePlan> prompts;
  bool unsafe = false;
  if (chat) {
    size_t bytes = 0;
    for (const Message& m : dialog.messages) bytes += m.content.size();
    if (std::optional<ApiError> long_text = CheckPromptBytes(bytes, "messages")) return fail("invalid", *long_text);
    absl::StatusOr<ChatPrompt> prompt = EncodeDialog(*tokenizer_, dialog.messages);
    if (!prompt.ok()) {
      return fail("invalid", {400, absl::StrCat("messages: ", prompt.status().message()), "invalid_request_error",
                              "messages", ""});
    }
    unsafe = prompt->unsafe;
    prompts.push_back({prompt->tokens, "", 0});
  } else {
    for (const std::string& text : completion.prompts) {
      if (std::optional<ApiError> long_text = CheckPromptBytes(text.size(), "prompt")) {
        return fail("invalid", *long_text);
      }
      absl::StatusOr<std::vector<int>> ids = tokenizer_->Encode(text, /*bos=*/true, /*eos=*/false);
      if (!ids.ok()) {
        return fail("invalid", {400, absl::StrCat("prompt: ", ids.status().message()), "invalid_request_error",
                                "prompt", ""});
      }
      prompts.push_back({*std::move(ids), text, 0});
    }
    // Token ids as given (no BOS added: the caller chose them).
    for (const std::vector<int>& ids : completion.prompt_ids) {
      if (std::optional<ApiError> outside = OutsideVocabulary("prompt", ids, tokenizer_->vocab_size())) {
        return fail("invalid", *outside);
      }
      absl::StatusOr<std::string> text = tokenizer_->Decode(ids);
      prompts.push_back({ids, text.ok() ? *text : std::string(), 0});
    }
  }
  for (ChoicePlan& p : prompts) {
    const int64_t length = static_cast<int64_t>(p.prompt_ids.size());
    p.max_tokens = params.max_tokens.value_or(chat ? std::max<int64_t>(0, context_ - length) : 16);
    if (length + p.max_tokens > context_) {
      return fail("invalid", {400,
                              absl::StrFormat("this model's context is %d tokens, but the prompt has %d tokens and "
                                              "max_tokens is %d (%d in all); shorten the prompt or lower max_tokens",
                                              context_, length, p.max_tokens, length + p.max_tokens),
                              "invalid_request_error", chat ? "messages" : "prompt", "context_length_exceeded"});
    }
    if (params.min_tokens > p.max_tokens) {
      return fail("invalid", {400,
                              absl::StrFormat("min_tokens: %d is more than max_tokens (%d)", params.min_tokens,
                                              p.max_tokens),
                              "invalid_request_error", "min_tokens", ""});
    }
  }
  const std::string id = absl::StrFormat("%s-%x%x", chat ? "chatcmpl" : "cmpl", created_, next_id_++);
  if (unsafe) {
    // The reference answers a dialog with special tags with this text.
    const int64_t created = UnixSeconds();
    ChoiceResult answer;
    answer.text = std::string(kUnsafeRequestAnswer);
    answer.finish_reason = "stop";
    std::vector<ChoiceResult> answers(params.n, answer);
    const Usage usage{static_cast<int64_t>(prompts[0].prompt_ids.size()), 0};
    if (!params.stream) {
      return exchange->Respond(
          JsonResponse(200, ChatResponse(id, created, options_.model, answers, params.logprobs, usage).dump()));
    }
    std::string body;
    for (int i = 0; i < params.n; ++i) body += Sse(ChatChunk(id, created, options_.model, i, answer, false, true));
    if (params.include_usage) body += Sse(UsageChunk(id, created, options_.model, "chat.completion.chunk", usage));
    return exchange->Respond({200, "text/event-stream", body + "data: [DONE]\n\n", {{"Cache-Control", "no-cache"}}});
  }
  // One request may not fill the queue by itself.
  constexpr size_t kMaxChoices = 256;
  if (prompts.size() * params.n > kMaxChoices) {
    return fail("invalid", {400,
                            absl::StrFormat("%d prompts x n = %d asks for %d completions; at most %d per request",
                                            prompts.size(), params.n, prompts.size() * params.n, kMaxChoices),
                            "invalid_request_error", "n", ""});
  }
  // A place in the queue, taken only if one is free (a hard limit).
  for (int waiting = waiting_requests_.load();;) {
    if (waiting >= options_.max_queue) {
      return fail("queue_full",
                  {429,
                   absl::StrFormat("%d requests are waiting already, the limit (--max_queue counts requests not yet "
                                   "scheduled); retry later",
                                   waiting),
                   "rate_limit_error", "", "queue_full"});
    }
    if (waiting_requests_.compare_exchange_weak(waiting, waiting + 1)) break;
  }
  std::vector<ChoicePlan> plans;
  for (const ChoicePlan& p : prompts) plans.insert(plans.end(), params.n, p);
  auto generation = std::make_shared<ApiGeneration>(*tokenizer_, params, &metrics_);
  auto call = std::make_shared<Call>(this, exchange, generation, id, chat, params);
  generation->SetListener([weak = std::weak_ptr<Call>(call)] {
    if (std::shared_ptr<Call> c = weak.lock()) c->Wake();
  });
  {
    absl::MutexLock lock(&mutex_);
    calls_.emplace(call.get(), call);
  }
  if (absl::Status s = generation->Start(*loop_, plans); !s.ok()) {
    waiting_requests_.fetch_sub(1);
    Finished(call.get());
    return fail("unavailable", {503, std::string(s.message()), "server_error", "", ""});
  }
  exchange->OnClientGone([weak = std::weak_ptr<Call>(call)] {
    if (std::shared_ptr<Call> c = weak.lock()) c->ClientGone();
  });
  call->Arm();  // A stream's head at once, and the events that came during Start.
}

absl::Status ApiServer::Start() {
  const auto check_key = [this](const http::Request& head) { return CheckKey(head); };
  const auto counted_check_key = [this](const http::Request& head) {
    metrics_.RequestArrived();
    return CheckKey(head);
  };
  http_.Handle({"GET", "/health", nullptr,
                [this](std::shared_ptr<http::Exchange> exchange) {
                  const absl::Status engine = loop_->status();
                  json body = {{"status", "ok"}};
                  if (!ready_) {
                    body["status"] = "loading";
                  } else if (!engine.ok()) {
                    body = {{"status", "error"}, {"message", std::string(engine.message())}};
                  } else if (draining_) {
                    body["status"] = "draining";
                  }
                  exchange->Respond(JsonResponse(body["status"] == "ok" ? 200 : 503, body.dump()));
                },
                /*on_io_thread=*/true});
  http_.Handle({"GET", "/metrics", nullptr,
                [this](std::shared_ptr<http::Exchange> exchange) {
                  exchange->Respond(
                      {200, "text/plain; version=0.0.4", metrics_.Render(loop_->stats()), {}});
                },
                /*on_io_thread=*/true});
  http_.Handle({"GET", "/v1/models", check_key,
                [this](std::shared_ptr<http::Exchange> exchange) {
                  exchange->Respond(JsonResponse(200, ModelList(options_.model, created_).dump()));
                },
                /*on_io_thread=*/true});
  http_.Handle({"POST", "/v1/completions", counted_check_key,
                [this](std::shared_ptr<http::Exchange> exchange) { HandleCompletions(exchange, false); }});
  http_.Handle({"POST", "/v1/chat/completions", counted_check_key,
                [this](std::shared_ptr<http::Exchange> exchange) { HandleCompletions(exchange, true); }});
  http_.Handle({"POST", "/tokenize", check_key,
                [this](std::shared_ptr<http::Exchange> exchange) { HandleTokenize(exchange); }});
  http_.Handle({"POST", "/detokenize", check_key,
                [this](std::shared_ptr<http::Exchange> exchange) { HandleDetokenize(exchange); }});
  return http_.Start();
}

void ApiServer::Stop() {
  http_.Stop();
  absl::MutexLock lock(&mutex_);
  calls_.clear();
}

}  // namespace llama
