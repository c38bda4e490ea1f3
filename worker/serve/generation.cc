#include "worker/serve/generation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "worker/sampling/sampler.h"

namespace llama {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

ApiGeneration::ApiGeneration(const Tokenizer& tokenizer, const GenerationParams& params, ServerMetrics* metrics,
                             std::shared_ptr<grammar::TokenAutomaton> grammar)
    : tokenizer_(tokenizer),
      params_(params),
      metrics_(metrics),
      grammar_(std::move(grammar)),
      arrival_(std::chrono::steady_clock::now()) {}

absl::Status ApiGeneration::Start(EngineLoop& loop, const std::vector<ChoicePlan>& plans) {
  loop_ = &loop;
  const uint64_t seed = params_.seeded ? params_.sampling.seed : std::random_device()();
  choices_.resize(plans.size());
  for (size_t i = 0; i < plans.size(); ++i) {
    Choice& c = choices_[i];
    c.plan = plans[i];
    // Echoed, the answer continues the prompt's text, so it is decoded and
    // spelled after it (a SentencePiece word-start space kept), and the
    // text is the decode of prompt and answer together.
    const absl::Span<const int> context =
        params_.echo ? absl::Span<const int>(plans[i].prompt_ids) : absl::Span<const int>();
    c.output = std::make_unique<TextOutput>(tokenizer_, params_.stop, context);
    c.speller.emplace(tokenizer_);
    for (int id : context) c.speller->Append(id);
    EngineRequest request;
    request.prompt = plans[i].prompt_ids;
    request.sampling = params_.sampling;
    request.sampling.seed = StreamSeed(seed, i);  // A seeded request's tokens do not depend on what else runs.
    request.max_new_tokens = plans[i].max_tokens;
    if (!params_.ignore_eos) request.stop_ids = tokenizer_.stop_ids();
    request.stop_ids.insert(request.stop_ids.end(), params_.stop_token_ids.begin(), params_.stop_token_ids.end());
    request.min_new_tokens = params_.min_tokens;
    request.prompt_logprobs = params_.echo && params_.logprobs;
    request.top_logprobs = params_.logprobs ? params_.top_logprobs : 0;
    if (grammar_ != nullptr) {
      absl::StatusOr<std::unique_ptr<grammar::TokenMatcher>> matcher = grammar::TokenMatcher::Start(grammar_);
      if (!matcher.ok()) {
        Cancel(matcher.status());
        return matcher.status();
      }
      request.grammar = std::move(*matcher);
    }
    std::weak_ptr<ApiGeneration> self = weak_from_this();
    request.sink = [self, i](const RequestEvent& e) {
      std::shared_ptr<ApiGeneration> g = self.lock();
      if (g == nullptr) return;
      Event event{static_cast<int>(i), e.kind, e.token, e.logprob, {e.top.begin(), e.top.end()}, {}, {}, e.finish,
                  e.status};
      if (e.kind == RequestEvent::kPromptLogprobs) {
        event.prompt_logprobs.assign(e.prompt_logprobs.begin(), e.prompt_logprobs.end());
        event.prompt_top.assign(e.prompt_top.begin(), e.prompt_top.end());
      }
      {
        absl::MutexLock lock(&g->mutex_);
        g->events_.push_back(std::move(event));
      }
      if (g->on_event_) g->on_event_();
    };
    absl::StatusOr<RequestId> id = loop.Submit(std::move(request));
    if (!id.ok()) {
      Cancel(id.status());
      return id.status();
    }
    c.id = *id;
    bool cancelled;
    {
      absl::MutexLock lock(&mutex_);
      ids_.push_back(*id);
      cancelled = !cancel_reason_.ok();
    }
    if (cancelled) loop.Cancel(*id);  // Cancel came while the others were submitted.
  }
  return absl::OkStatus();
}

void ApiGeneration::Cancel(absl::Status why) {
  std::vector<RequestId> ids;
  {
    absl::MutexLock lock(&mutex_);
    if (cancel_reason_.ok()) cancel_reason_ = std::move(why);
    ids = ids_;
  }
  // Finished ones too: the engine ignores ids it no longer holds, and
  // choices_ belongs to the thread that calls Next.
  for (RequestId id : ids) loop_->Cancel(id);
}

LoggedToken ApiGeneration::Logged(int token, std::string bytes, float logprob) const {
  std::string name = params_.return_tokens_as_token_ids ? absl::StrCat("token_id:", token) : TokenField(bytes);
  return {std::move(name), std::move(bytes), logprob};
}

void ApiGeneration::LogToken(Choice& c, Delta& delta, int token, std::string bytes, float logprob,
                             absl::Span<const TopToken> top, const TokenSpeller& speller) {
  if (!params_.logprobs) return;
  TokenLogprob logged{Logged(token, std::move(bytes), logprob), c.spelled, {}};
  c.spelled += static_cast<int64_t>(logged.bytes.size());
  for (const TopToken& t : top) logged.top.push_back(Logged(t.token, speller.Spell(t.token), t.logprob));
  delta.part.logprobs.push_back(std::move(logged));
}

void ApiGeneration::Apply(const Event& e, Delta& delta) {
  Choice& c = choices_[e.choice];
  if (!c.scheduled && (e.kind == RequestEvent::kScheduled || e.kind == RequestEvent::kFinished)) {
    c.scheduled = true;
    ++scheduled_;
  }
  if (c.finished) return;
  switch (e.kind) {
    case RequestEvent::kScheduled:
      if (metrics_ != nullptr) metrics_->Scheduled(SecondsSince(arrival_));
      return;
    case RequestEvent::kPromptLogprobs: {
      // Echo with logprobs: the prompt and its tokens lead, each spelled
      // after the ones before it (so they join to the prompt), the first
      // without a log-probability or alternatives.
      delta.part.text = c.plan.prompt_text;
      TokenSpeller speller(tokenizer_);
      const size_t k = params_.top_logprobs;
      const absl::Span<const TopToken> top(e.prompt_top);
      for (size_t p = 0; p < c.plan.prompt_ids.size(); ++p) {
        const int id = c.plan.prompt_ids[p];
        std::string bytes = p == 0 && c.plan.bos_added ? std::string() : speller.Spell(id);
        if (p == 0) {
          LogToken(c, delta, id, std::move(bytes), std::numeric_limits<float>::quiet_NaN(), {}, speller);
        } else {
          LogToken(c, delta, id, std::move(bytes), e.prompt_logprobs[p], top.subspan(p * k, k), speller);
        }
        speller.Append(id);
      }
      // Generated text starts where the echoed prompt ends, spelled or not
      // as its tokens are (a prompt of ids that are not UTF-8 is echoed
      // with U+FFFD).
      c.spelled = static_cast<int64_t>(c.plan.prompt_text.size());
      return;
    }
    case RequestEvent::kToken: {
      const auto now = std::chrono::steady_clock::now();
      if (metrics_ != nullptr) {
        if (c.generated == 0) {
          metrics_->FirstToken(SecondsSince(arrival_));
        } else {
          metrics_->NextToken(std::chrono::duration<double>(now - c.last_token).count());
        }
      }
      c.last_token = now;
      ++c.generated;
      const std::vector<int>& stops = tokenizer_.stop_ids();
      if (std::find(stops.begin(), stops.end(), e.token) != stops.end()) return;  // Ends it; no text.
      absl::StatusOr<std::string> text = c.output->Push(e.token);
      LogToken(c, delta, e.token, c.speller->Spell(e.token), e.logprob, e.top, *c.speller);
      c.speller->Append(e.token);
      if (text.ok()) delta.part.text += *text;
      if (c.output->stopped()) {
        // A stop string: the answer is complete, the rest is not wanted.
        loop_->Cancel(c.id);
        delta.part.finish_reason = "stop";
        c.finished = true;
        ++finished_;
      }
      return;
    }
    case RequestEvent::kFinished: {
      c.finished = true;
      ++finished_;
      if (e.finish == FinishReason::kError) {
        if (failure_.ok() || absl::IsCancelled(failure_)) {
          failure_ = absl::UnavailableError(absl::StrCat("the engine failed: ", e.status.message()));
        }
        return;  // No finish reason: the choice did not end, it was cut.
      }
      if (e.finish == FinishReason::kCancelled) {
        if (failure_.ok()) {
          absl::MutexLock lock(&mutex_);
          failure_ = !cancel_reason_.ok() ? cancel_reason_ : absl::CancelledError("the request was cancelled");
        }
        delta.part.finish_reason = "abort";
        return;
      }
      if (absl::StatusOr<std::string> rest = c.output->Finish(); rest.ok()) delta.part.text += *rest;
      delta.part.finish_reason = e.finish == FinishReason::kStop ? "stop" : "length";
      return;
    }
  }
}

std::vector<ApiGeneration::Delta> ApiGeneration::Next(absl::Duration timeout) {
  std::deque<Event> events;
  {
    absl::MutexLock lock(&mutex_);
    const auto has_events = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) { return !events_.empty(); };
    mutex_.AwaitWithTimeout(absl::Condition(&has_events), timeout);
    events.swap(events_);
  }
  std::vector<Delta> deltas;
  for (const Event& e : events) {
    Choice& c = choices_[e.choice];
    Delta delta;
    delta.index = e.choice;
    // Echo without logprobs: the prompt leads the first delta (with
    // logprobs it comes with its log-probabilities).
    if (!c.started && params_.echo && !params_.logprobs) delta.part.text = c.plan.prompt_text;
    Apply(e, delta);
    const bool news = !delta.part.text.empty() || !delta.part.logprobs.empty() || !delta.part.finish_reason.empty();
    if (!news) continue;
    delta.first = !c.started;
    c.started = true;
    c.result.text += delta.part.text;
    c.result.logprobs.insert(c.result.logprobs.end(), delta.part.logprobs.begin(), delta.part.logprobs.end());
    if (!delta.part.finish_reason.empty()) c.result.finish_reason = delta.part.finish_reason;
    deltas.push_back(std::move(delta));
  }
  if (done() && failure_.ok() && metrics_ != nullptr) {
    const Usage u = usage();
    metrics_->Finished(SecondsSince(arrival_), u.prompt_tokens, u.completion_tokens);
    metrics_ = nullptr;  // Once.
  }
  return deltas;
}

std::vector<ChoiceResult> ApiGeneration::Results() const {
  std::vector<ChoiceResult> results;
  for (const Choice& c : choices_) results.push_back(c.result);
  return results;
}

Usage ApiGeneration::usage() const {
  Usage u;
  for (const Choice& c : choices_) {
    u.completion_tokens += c.generated;
  }
  // The prompt counts once per prompt, not once per choice (OpenAI's usage).
  const int n = std::max(1, params_.n);
  for (size_t i = 0; i < choices_.size(); i += n) u.prompt_tokens += choices_[i].plan.prompt_ids.size();
  return u;
}

}  // namespace llama
