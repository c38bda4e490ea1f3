#include "worker/serve/api_server.h"

#include <glog/logging.h>

#include <algorithm>
#include <optional>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "tokenizer/chat_format.h"
#include "worker/serve/api_keys.h"
#include "worker/serve/api_response.h"

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

// The token ids a request's parameters name (logit_bias, stop_token_ids)
// outside [0, vocab): SamplingParams::Validate checks logit_bias's (the
// parser checked its ranges), its error naming the field before a colon.
std::optional<ApiError> OutsideVocabulary(const GenerationParams& params, int64_t vocab) {
  if (absl::Status s = params.sampling.Validate(vocab); !s.ok()) {
    const std::string param(s.message().substr(0, s.message().find(':')));
    return ApiError{400, std::string(s.message()), "invalid_request_error", param, ""};
  }
  return OutsideVocabulary("stop_token_ids", params.stop_token_ids, vocab);
}

// One request may not fill the queue by itself.
std::optional<ApiError> CheckChoiceCount(size_t prompts, int n) {
  constexpr size_t kMaxChoices = 256;
  if (prompts * n <= kMaxChoices) return std::nullopt;
  return ApiError{400,
                  absl::StrFormat("%d prompts x n = %d asks for %d completions; at most %d per request", prompts, n,
                                  prompts * n, kMaxChoices),
                  "invalid_request_error", "n", ""};
}

// The reference answers a dialog with special tags with this text, as a
// whole answer or a stream.
http::Response UnsafeAnswer(const std::string& id, const std::string& model, const GenerationParams& params,
                            const ChoicePlan& prompt) {
  const int64_t created = UnixSeconds();
  ChoiceResult answer;
  answer.text = std::string(kUnsafeRequestAnswer);
  answer.finish_reason = "stop";
  const Usage usage{static_cast<int64_t>(prompt.prompt_ids.size()), 0};
  if (!params.stream) {
    const std::vector<ChoiceResult> answers(params.n, answer);
    return JsonResponse(200, ChatResponse(id, created, model, answers, params.logprobs, usage).dump());
  }
  std::string body;
  for (int i = 0; i < params.n; ++i) body += Sse(ChatChunk(id, created, model, i, answer, false, true));
  if (params.include_usage) body += Sse(UsageChunk(id, created, model, "chat.completion.chunk", usage));
  return {200, "text/event-stream", body + "data: [DONE]\n\n", {{"Cache-Control", "no-cache"}}};
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

ApiServer::ApiServer(EngineLoop* loop, const Tokenizer* tokenizer, int64_t context, ApiServerOptions options)
    : loop_(loop),
      tokenizer_(tokenizer),
      context_(context),
      options_(std::move(options)),
      created_(UnixSeconds()),
      max_token_bytes_(MaxTokenBytes(*tokenizer)),
      grammars_(tokenizer),
      call_host_{&http_, &metrics_, options_.model, &waiting_requests_, [this](ApiCall* call) { Finished(call); }},
      http_([this] {
        http::ServerOptions o = ApiHttpOptions(options_.host, options_.port, options_.limits, options_.access_log);
        o.io_threads = options_.io_threads;
        o.worker_threads = options_.worker_threads;
        return o;
      }()) {}

ApiServer::~ApiServer() { Stop(); }

std::optional<http::Response> ApiServer::CheckKey(const http::Request& head) {
  std::optional<http::Response> refused = RefuseWithoutKey(head, options_.api_keys);
  if (refused.has_value()) metrics_.Failed("auth");
  return refused;
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

std::optional<ApiError> ApiServer::EncodeText(const std::string& text, bool bos, std::vector<int>* ids) const {
  if (std::optional<ApiError> long_text = CheckPromptBytes(text.size(), "prompt")) return long_text;
  absl::StatusOr<std::vector<int>> encoded = tokenizer_->Encode(text, bos, /*eos=*/false);
  if (!encoded.ok()) {
    return ApiError{400, absl::StrCat("prompt: ", encoded.status().message()), "invalid_request_error", "prompt",
                    ""};
  }
  *ids = *std::move(encoded);
  return std::nullopt;
}

std::optional<ApiError> ApiServer::EncodeMessages(const Dialog& messages, const ToolUse& tools,
                                                  ChatPrompt* prompt) const {
  if (!tools.tools.empty() && tokenizer_->family() != Tokenizer::Family::kTiktoken) {
    return ApiError{400, "tools: Llama 2 has no tool-calling format (Llama 3.1 and later have one)",
                    "invalid_request_error", "tools", ""};
  }
  size_t bytes = 0;
  for (const Message& m : messages) bytes += m.content.size();
  if (std::optional<ApiError> long_text = CheckPromptBytes(bytes, "messages")) return long_text;
  absl::StatusOr<ChatPrompt> encoded = EncodeDialog(*tokenizer_, messages, MakeToolPrompt(tools, LlamaPromptDate()));
  if (!encoded.ok()) {
    return ApiError{400, absl::StrCat("messages: ", encoded.status().message()), "invalid_request_error",
                    "messages", ""};
  }
  *prompt = *std::move(encoded);
  return std::nullopt;
}

void ApiServer::HandleTokenize(const std::shared_ptr<http::Exchange>& exchange) {
  TokenizeRequest request;
  ApiError error;
  if (!ParseTokenizeRequest(exchange->request().body, &request, &error)) return Reply(exchange, error);
  if (std::optional<ApiError> refused = Admit(request.model)) return Reply(exchange, *refused);
  std::vector<int> tokens;
  if (request.prompt.has_value()) {
    if (std::optional<ApiError> bad = EncodeText(*request.prompt, request.add_special_tokens, &tokens)) {
      return Reply(exchange, *bad);
    }
  } else {
    ChatPrompt prompt;
    if (std::optional<ApiError> bad = EncodeMessages(request.messages, request.tools, &prompt)) {
      return Reply(exchange, *bad);
    }
    tokens = prompt.tokens;
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

void ApiServer::Finished(ApiCall* call) {
  absl::MutexLock lock(&mutex_);
  calls_.erase(call);
}

void ApiServer::CancelAll() {
  std::vector<std::shared_ptr<ApiCall>> calls;
  {
    absl::MutexLock lock(&mutex_);
    for (const auto& [raw, call] : calls_) calls.push_back(call);
  }
  for (const std::shared_ptr<ApiCall>& call : calls) {
    call->generation().Cancel(
        absl::CancelledError("the request was cancelled: the server is shutting down and its drain time ran out"));
  }
}

std::optional<ApiError> ApiServer::EncodeCompletionPrompts(const CompletionRequest& request,
                                                           std::vector<ChoicePlan>* prompts) const {
  for (const std::string& text : request.prompts) {
    std::vector<int> ids;
    if (std::optional<ApiError> bad = EncodeText(text, /*bos=*/true, &ids)) return bad;
    prompts->push_back({std::move(ids), text, 0, /*bos_added=*/true});
  }
  // Token ids as given (no BOS added: the caller chose them).
  for (const std::vector<int>& ids : request.prompt_ids) {
    if (std::optional<ApiError> outside = OutsideVocabulary("prompt", ids, tokenizer_->vocab_size())) {
      return outside;
    }
    absl::StatusOr<std::string> text = tokenizer_->Decode(ids);
    prompts->push_back({ids, text.ok() ? *text : std::string(), 0});
  }
  return std::nullopt;
}

std::optional<ApiError> ApiServer::PlanLengths(const GenerationParams& params, bool chat,
                                               std::vector<ChoicePlan>& prompts) const {
  for (ChoicePlan& p : prompts) {
    const int64_t length = static_cast<int64_t>(p.prompt_ids.size());
    p.max_tokens = params.max_tokens.value_or(chat ? std::max<int64_t>(0, context_ - length) : 16);
    if (length + p.max_tokens > context_) {
      return ApiError{400,
                      absl::StrFormat("this model's context is %d tokens, but the prompt has %d tokens and "
                                      "max_tokens is %d (%d in all); shorten the prompt or lower max_tokens",
                                      context_, length, p.max_tokens, length + p.max_tokens),
                      "invalid_request_error", chat ? "messages" : "prompt", "context_length_exceeded"};
    }
    if (params.min_tokens > p.max_tokens) {
      return ApiError{400,
                      absl::StrFormat("min_tokens: %d is more than max_tokens (%d)", params.min_tokens, p.max_tokens),
                      "invalid_request_error", "min_tokens", ""};
    }
  }
  return std::nullopt;
}

std::optional<ApiError> ApiServer::TakeQueuePlace() {
  for (int waiting = waiting_requests_.load();;) {
    if (waiting >= options_.max_queue) {
      return ApiError{429,
                      absl::StrFormat("%d requests are waiting already, the limit (--max_queue counts requests not "
                                      "yet scheduled); retry later",
                                      waiting),
                      "rate_limit_error", "", "queue_full"};
    }
    if (waiting_requests_.compare_exchange_weak(waiting, waiting + 1)) return std::nullopt;
  }
}

absl::StatusOr<std::shared_ptr<grammar::TokenAutomaton>> ApiServer::CompileGrammar(const GenerationParams& params) {
  if (params.grammar.empty()) return nullptr;
  return grammars_.Get(params.grammar);
}

void ApiServer::StartCall(const std::shared_ptr<http::Exchange>& exchange, const std::string& id, bool chat,
                          const GenerationParams& params, const std::vector<ChoicePlan>& prompts,
                          std::shared_ptr<grammar::TokenAutomaton> grammar) {
  std::vector<ChoicePlan> plans;
  for (const ChoicePlan& p : prompts) plans.insert(plans.end(), params.n, p);
  auto generation = std::make_shared<ApiGeneration>(*tokenizer_, params, &metrics_, std::move(grammar));
  auto call = std::make_shared<ApiCall>(&call_host_, exchange, generation, id, chat, params);
  generation->SetListener([weak = std::weak_ptr<ApiCall>(call)] {
    if (std::shared_ptr<ApiCall> c = weak.lock()) c->Wake();
  });
  {
    absl::MutexLock lock(&mutex_);
    calls_.emplace(call.get(), call);
  }
  if (absl::Status s = generation->Start(*loop_, plans); !s.ok()) {
    waiting_requests_.fetch_sub(1);
    Finished(call.get());
    metrics_.Failed("unavailable");
    return Reply(exchange, {503, std::string(s.message()), "server_error", "", ""});
  }
  exchange->OnClientGone([weak = std::weak_ptr<ApiCall>(call)] {
    if (std::shared_ptr<ApiCall> c = weak.lock()) c->ClientGone();
  });
  call->Arm();  // A stream's head at once, and the events that came during Start.
}

void ApiServer::HandleCompletions(const std::shared_ptr<http::Exchange>& exchange, bool chat) {
  const auto fail = [&](const char* reason, const ApiError& error) {
    metrics_.Failed(reason);
    Reply(exchange, error);
  };
  const std::string& raw = exchange->request().body;
  ApiError error;
  CompletionRequest completion;
  ChatRequest dialog;
  const bool parsed = chat ? ParseChatRequest(raw, &dialog, &error) : ParseCompletionRequest(raw, &completion, &error);
  if (!parsed) return fail("invalid", error);
  // Llama 3.1 ends a call with <|eom_id|>: with tools, it ends the answer.
  if (chat && !dialog.params.tools.tools.empty()) {
    const int eom = Llama31SpecialId(*tokenizer_, "<|eom_id|>");
    if (eom >= 0) dialog.params.stop_token_ids.push_back(eom);
  }
  const GenerationParams& params = chat ? dialog.params : completion.params;
  if (std::optional<ApiError> refused = Admit(chat ? dialog.model : completion.model)) {
    return Reply(exchange, *refused);
  }
  if (!params.ignored_fields.empty()) {
    LOG_FIRST_N(WARNING, 20) << exchange->request().path << ": fields this server does not know, without effect: "
                             << Loggable(params.ignored_fields);
  }
  if (std::optional<ApiError> outside = OutsideVocabulary(params, tokenizer_->vocab_size())) {
    return fail("invalid", *outside);
  }
  std::vector<ChoicePlan> prompts;
  ChatPrompt chat_prompt;
  if (std::optional<ApiError> bad = chat ? EncodeMessages(dialog.messages, dialog.params.tools, &chat_prompt)
                                         : EncodeCompletionPrompts(completion, &prompts)) {
    return fail("invalid", *bad);
  }
  if (chat) prompts.push_back({chat_prompt.tokens, "", 0});
  if (std::optional<ApiError> too_long = PlanLengths(params, chat, prompts)) return fail("invalid", *too_long);
  const std::string id = absl::StrFormat("%s-%x%x", chat ? "chatcmpl" : "cmpl", id_salt_, next_id_++);
  if (chat_prompt.unsafe) return exchange->Respond(UnsafeAnswer(id, options_.model, params, prompts[0]));
  if (std::optional<ApiError> many = CheckChoiceCount(prompts.size(), params.n)) return fail("invalid", *many);
  absl::StatusOr<std::shared_ptr<grammar::TokenAutomaton>> grammar = CompileGrammar(params);
  if (!grammar.ok()) {
    return fail("invalid", {400, std::string(grammar.status().message()), "invalid_request_error", "grammar", ""});
  }
  if (std::optional<ApiError> full = TakeQueuePlace()) return fail("queue_full", *full);
  StartCall(exchange, id, chat, params, prompts, *std::move(grammar));
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
  // The prefix cache's changes since ?after=N (kv_cache_events.h), for a
  // router in front of several servers: {"next", "reset", "epoch",
  // "block_size", "events": [{"stored", "hash"}]}, hashes and epoch as 16
  // hex digits (JSON numbers would round them).
  http_.Handle({"GET", "/v1/kv_cache_events", check_key,
                [this](std::shared_ptr<http::Exchange> exchange) {
                  const http::Request& request = exchange->request();
                  uint64_t after = 0;
                  const size_t query = request.target.find("?after=");
                  if (query != std::string::npos &&
                      !absl::SimpleAtoi(absl::string_view(request.target).substr(query + 7), &after)) {
                    return Reply(exchange, {400, "after: expected the `next` of the last answer (a whole number)",
                                            "invalid_request_error", "after", ""});
                  }
                  const KvCacheEvents::Batch batch = loop_->cache_events().Since(after, 4096);
                  json events = json::array();
                  for (const KvCacheEvents::Event& e : batch.events) {
                    events.push_back({{"stored", e.stored}, {"hash", absl::StrFormat("%016x", e.hash)}});
                  }
                  exchange->Respond(JsonResponse(200, json{{"next", batch.next},
                                                           {"reset", batch.reset},
                                                           {"epoch", absl::StrFormat("%016x",
                                                                                     loop_->cache_events().epoch())},
                                                           {"block_size", loop_->kv_block_size()},
                                                           {"events", std::move(events)}}
                                                          .dump()));
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
