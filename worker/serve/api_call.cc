#include "worker/serve/api_call.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "worker/serve/api_response.h"

namespace llama {
namespace {

using nlohmann::json;

// Cut answers are errors: 503 whether a rank failed or the drain deadline
// passed (both are the server's state, not the request's fault).
ApiError FailureError(const absl::Status& failure) {
  return {503, std::string(failure.message()), "server_error", "",
          absl::IsCancelled(failure) ? "cancelled" : "engine_failed"};
}

}  // namespace

ApiCall::ApiCall(const ApiCallHost* host, std::shared_ptr<http::Exchange> exchange,
                 std::shared_ptr<ApiGeneration> generation, std::string id, bool chat, GenerationParams params)
    : host_(host),
      exchange_(std::move(exchange)),
      generation_(std::move(generation)),
      id_(std::move(id)),
      created_(UnixSeconds()),
      chat_(chat),
      params_(std::move(params)) {}

void ApiCall::Wake() {
  if (!armed_) return;  // Until every choice is submitted; Arm wakes it then.
  if (pending_.fetch_add(1) == 0) host_->http->Post([self = shared_from_this()] { self->Pump(); });
}

void ApiCall::Arm() {
  armed_ = true;
  Wake();
}

void ApiCall::ClientGone() {
  host_->metrics->Failed("cancelled");
  generation_->Cancel(absl::CancelledError("the client went away"));
}

void ApiCall::Pump() {
  for (int seen = pending_.load();; seen = pending_.load()) {
    Drain();
    if (pending_.fetch_sub(seen) == seen) return;
  }
}

void ApiCall::Drain() {
  if (answered_) return;
  const std::vector<ApiGeneration::Delta> deltas = generation_->Next(absl::ZeroDuration());
  if (!released_ && (generation_->all_scheduled() || generation_->done())) {
    released_ = true;
    host_->waiting_requests->fetch_sub(1);
  }
  const absl::Status& failure = generation_->failure();
  if (params_.stream) return DrainStream(deltas, failure);
  if (generation_->done()) DrainAnswer(failure);
}

void ApiCall::DrainStream(const std::vector<ApiGeneration::Delta>& deltas, const absl::Status& failure) {
  const std::string& model = host_->model;
  // The head goes from here, so that it leaves before any chunk.
  if (!stream_started_) exchange_->StartStream(200, "text/event-stream", {{"Cache-Control", "no-cache"}});
  stream_started_ = true;
  std::string out;
  for (const ApiGeneration::Delta& d : deltas) {
    if (!chat_) {
      out += Sse(CompletionChunk(id_, created_, model, d.index, d.part, params_.logprobs));
      continue;
    }
    ChoiceResult part = d.part;
    if (params_.tools.active()) ReadToolCallDelta(d.index, &part);
    out += Sse(ChatChunk(id_, created_, model, d.index, part, params_.logprobs, d.first));
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
}

void ApiCall::DrainAnswer(const absl::Status& failure) {
  const std::string& model = host_->model;
  if (!failure.ok()) {
    Reply(exchange_, FailureError(failure));
  } else {
    std::vector<ChoiceResult> results = generation_->Results();
    for (size_t i = 0; chat_ && params_.tools.active() && i < results.size(); ++i) ReadToolCall(i, &results[i]);
    const json body = chat_ ? ChatResponse(id_, created_, model, results, params_.logprobs, generation_->usage())
                            : CompletionResponse(id_, created_, model, results, params_.logprobs, generation_->usage());
    exchange_->Respond(JsonResponse(200, body.dump()));
  }
  Finish(failure);
}

std::string ApiCall::ToolCallId(int index) const {
  // Unique as the response's id is, and one per choice: one call per answer.
  return absl::StrFormat("call-%s-%d", absl::string_view(id_).substr(id_.find('-') + 1), index);
}

void ApiCall::ReadToolCall(int index, ChoiceResult* answer) const {
  std::optional<ToolCall> call = ParseToolCall(params_.tools, answer->text);
  if (!call.has_value() || answer->finish_reason == "abort") {
    answer->text = std::string(StripEndOfMessage(answer->text));
    return;
  }
  call->id = ToolCallId(index);
  answer->tool_calls = {*std::move(call)};
  answer->text.clear();
  answer->finish_reason = "tool_calls";
}

void ApiCall::ReadToolCallDelta(int index, ChoiceResult* delta) {
  while (static_cast<int>(tool_streams_.size()) <= index) tool_streams_.emplace_back(&params_.tools);
  ToolCallStream& stream = tool_streams_[index];
  delta->text = stream.Push(delta->text);
  if (delta->finish_reason.empty()) return;
  std::string rest;
  std::optional<ToolCall> call = stream.Finish(&rest);
  if (!call.has_value() || delta->finish_reason == "abort") {  // A cut answer stays cut, as text.
    delta->text += rest;
    return;
  }
  call->id = ToolCallId(index);
  delta->tool_calls = {*std::move(call)};
  delta->finish_reason = "tool_calls";
}

void ApiCall::Finish(const absl::Status& failure) {
  answered_ = true;
  if (!failure.ok() && !exchange_->client_gone()) {
    host_->metrics->Failed(absl::IsCancelled(failure) ? "cancelled" : "engine");
  }
  host_->finished(this);
}

}  // namespace llama
