#include "worker/engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include <glog/logging.h>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "ops/kv_cache_view.h"
#include "worker/engine/ngram_lookup.h"
#include "worker/sampling/sampler.h"

namespace llama {

std::string EngineStats::DescribeSpeculation() const {
  if (proposed_tokens == 0) return "";
  return absl::StrFormat("%s speculation kept %d of %d guesses (%.1f%%), %.2f tokens per request step",
                         speculation_source == "ngram" ? "n-gram" : speculation_source, accepted_tokens,
                         proposed_tokens, 100.0 * accepted_tokens / proposed_tokens, tokens_per_request_step());
}

struct Engine::Sequence {
  RequestId id = 0;
  EngineRequest request;
  std::vector<int> tokens;  // Prompt, then generated tokens.
  int64_t prompt_len = 0;
  int64_t limit = 0;  // Positions [0, limit) may be filled.
  std::vector<int32_t> blocks;
  std::vector<uint64_t> hashes;  // Chain hashes of its leading full blocks.
  int64_t computed = 0;          // Positions [0, computed) are in the cache.
  std::vector<float> prompt_logprobs;
  std::vector<TopToken> prompt_top;  // [prompt_len * request.top_logprobs], with prompt_logprobs.
  bool prompt_scored = false;  // Reported (or not asked for).
  Rng rng{0};
  absl::flat_hash_map<int, int> generated_counts;  // For the penalties.
  // Per row of this step's choices, while the model runs: adjustments and
  // grammar masks (row 0, and one more per guess).
  std::vector<std::vector<LogitAdjustment>> row_adjustments;
  std::vector<std::shared_ptr<const grammar::TokenMask>> row_masks;
  // Speculative decoding: [last token, guesses...], this step's rows.
  std::vector<int> verify;
  Rng rng_before_guesses{0};  // rng before this step's draws, with guesses.
  // The draft model's cache of its tokens (EngineOptions::draft_model):
  // blocks in the draft's pool, positions [0, draft_computed) filled.
  std::vector<int32_t> draft_blocks;
  int64_t draft_computed = 0;
  GuessRecord guesses;        // How often they held (speculation_policy.h).
  uint64_t admission = 0;  // Order of its latest admission.
  bool counted = false;    // Its prompt is in the stats.
  bool finished = false;

  int64_t length() const { return static_cast<int64_t>(tokens.size()); }
  bool scoring() const { return !prompt_scored && computed < prompt_len - 1; }
  int64_t generated() const { return length() - prompt_len; }
  bool penalized() const { return request.sampling.presence_penalty != 0 || request.sampling.frequency_penalty != 0; }
  bool adjusted() const {
    return penalized() || !request.sampling.logit_bias.empty() || generated() < request.min_new_tokens;
  }
  // The penalties and biases of its next choice, by token id, into `adjustments`.
  void UpdateAdjustments(std::vector<LogitAdjustment>& adjustments) const {
    absl::flat_hash_map<int, float> delta;
    const SamplingParams& sampling = request.sampling;
    for (const LogitBias& b : sampling.logit_bias) delta[b.token] += b.delta;
    for (const auto& [token, count] : generated_counts) {
      delta[token] -= sampling.frequency_penalty * static_cast<float>(count) + sampling.presence_penalty;
    }
    // Below any logit a model gives, and finite as adjustments must be.
    constexpr float kNever = -1e30f;
    if (generated() < request.min_new_tokens) {
      for (int stop : request.stop_ids) delta[stop] = kNever;
    }
    adjustments.clear();
    for (const auto& [token, d] : delta) adjustments.push_back({token, d});
    std::sort(adjustments.begin(), adjustments.end(),
              [](const LogitAdjustment& a, const LogitAdjustment& b) { return a.token < b.token; });
  }
};

Engine::Engine(LanguageModel* model, const EngineOptions& options)
    : model_(model), options_(options), pool_(model->limits().kv_blocks, model->limits().kv_block_size, options.prefix_caching) {
  pool_.set_events(&cache_events_);
  if (options_.max_num_batched_tokens <= 0) options_.max_num_batched_tokens = model->limits().max_step_tokens;
  if (options_.max_num_seqs <= 0) options_.max_num_seqs = model->limits().max_batch_size;
  // A step holds every running request: no more than the model's step takes.
  options_.max_num_batched_tokens = std::min(options_.max_num_batched_tokens, model->limits().max_step_tokens);
  options_.max_num_seqs = std::min(options_.max_num_seqs, model->limits().max_batch_size);
  if (options_.speculative_tokens > 0 && options_.draft_model != nullptr) {
    const ModelLimits& draft = options_.draft_model->limits();
    draft_pool_.emplace(draft.kv_blocks, draft.kv_block_size, /*prefix_caching=*/false);
  }
  absl::MutexLock lock(&mutex_);
  stats_.kv_blocks_total = pool_.blocks();
  if (options_.speculative_tokens > 0) stats_.speculation_source = options_.draft_model != nullptr ? "draft" : "ngram";
}

Engine::~Engine() = default;

absl::StatusOr<RequestId> Engine::Submit(EngineRequest request) {
  RETURN_IF_ERROR(CheckEngineRequest(request, model_->limits().vocab_size, model_->limits().max_seq_len));
  const int64_t max_seq_len = model_->limits().max_seq_len;
  auto s = std::make_unique<Sequence>();
  s->prompt_len = static_cast<int64_t>(request.prompt.size());
  s->limit = std::min(max_seq_len, s->prompt_len + request.max_new_tokens.value_or(max_seq_len));
  s->tokens = request.prompt;
  s->rng = Rng(request.sampling.seed);
  s->prompt_scored = !request.prompt_logprobs;
  if (request.prompt_logprobs) {
    s->prompt_logprobs.assign(s->prompt_len, 0.0f);
    s->prompt_top.resize(s->prompt_len * request.top_logprobs);
  }
  s->request = std::move(request);
  absl::MutexLock lock(&mutex_);
  if (!failed_.ok()) return absl::UnavailableError(absl::StrCat("the engine failed: ", failed_.message()));
  s->id = next_id_++;
  const RequestId id = s->id;
  submitted_.push_back(std::move(s));
  return id;
}

void Engine::Cancel(RequestId id) {
  absl::MutexLock lock(&mutex_);
  cancelled_.insert(id);
}

bool Engine::idle() const {
  absl::MutexLock lock(&mutex_);
  return submitted_.empty() && cancelled_.empty() && running_.empty() && waiting_.empty();
}

EngineStats Engine::stats() const {
  absl::MutexLock lock(&mutex_);
  return stats_;
}

std::vector<std::vector<int32_t>> Engine::running_block_tables() const {
  std::vector<std::vector<int32_t>> tables;
  for (const auto& s : running_) tables.push_back(s->blocks);
  return tables;
}

void Engine::Finish(Sequence& s, FinishReason reason, const absl::Status& status) {
  for (int32_t b : s.blocks) pool_.Release(b);
  s.blocks.clear();
  ReleaseDraft(s);
  s.finished = true;
  RequestEvent event;
  event.kind = RequestEvent::kFinished;
  event.finish = reason;
  event.status = status;
  if (s.request.sink) s.request.sink(event);
}

void Engine::Intake() {
  std::vector<std::unique_ptr<Sequence>> submitted;
  absl::flat_hash_set<RequestId> cancelled;
  {
    absl::MutexLock lock(&mutex_);
    submitted.swap(submitted_);
    cancelled.swap(cancelled_);
  }
  for (auto& s : submitted) {
    // Nothing to generate and no prompt to score: done before it starts.
    if (s->prompt_len >= s->limit && !s->scoring()) {
      ReportPromptLogprobs(*s);
      Finish(*s, FinishReason::kLength);
      continue;
    }
    // A grammar that matches only the empty text.
    if (s->request.grammar != nullptr && s->request.grammar->complete() && !s->scoring()) {
      Finish(*s, FinishReason::kStop);
      continue;
    }
    waiting_.push_back(std::move(s));
  }
  if (cancelled.empty()) return;
  for (auto& s : running_) {
    if (cancelled.contains(s->id)) Finish(*s, FinishReason::kCancelled);
  }
  for (auto& s : waiting_) {
    if (cancelled.contains(s->id)) Finish(*s, FinishReason::kCancelled);
  }
  RemoveFinished();
}

void Engine::RemoveFinished() {
  const auto finished = [](const std::unique_ptr<Sequence>& s) { return s->finished; };
  running_.erase(std::remove_if(running_.begin(), running_.end(), finished), running_.end());
  waiting_.erase(std::remove_if(waiting_.begin(), waiting_.end(), finished), waiting_.end());
}

void Engine::ReportPromptLogprobs(Sequence& s) {
  if (s.prompt_scored || s.scoring()) return;
  s.prompt_scored = true;
  RequestEvent event;
  event.kind = RequestEvent::kPromptLogprobs;
  event.prompt_logprobs = s.prompt_logprobs;
  event.prompt_top = s.prompt_top;
  if (s.request.sink) s.request.sink(event);
}

bool Engine::Grow(Sequence& s, int64_t positions, bool evict) {
  const int64_t needed = KvBlocksFor(positions, pool_.block_size());
  while (static_cast<int64_t>(s.blocks.size()) < needed) {
    std::optional<int32_t> block = pool_.Allocate(evict);
    if (!block.has_value()) return false;
    s.blocks.push_back(*block);
  }
  return true;
}

void Engine::Preempt(Sequence& s) {
  for (int32_t b : s.blocks) pool_.Release(b);
  s.blocks.clear();
  ReleaseDraft(s);
  s.hashes.clear();
  s.computed = 0;
  const auto it = std::find_if(running_.begin(), running_.end(), [&](const auto& r) { return r.get() == &s; });
  waiting_.push_front(std::move(*it));
  running_.erase(it);
  absl::MutexLock lock(&mutex_);
  ++stats_.preemptions;
}

Engine::Sequence* Engine::Newest() {
  Sequence* newest = nullptr;
  for (auto& s : running_) {
    if (newest == nullptr || s->admission > newest->admission) newest = s.get();
  }
  return newest;
}

bool Engine::Admit(Sequence& s) {
  const int64_t block_size = pool_.block_size();
  // Cached leading blocks, leaving at least one token to compute (its
  // logits pick the next token); none when the prompt is to be scored.
  if (s.scoring() || s.prompt_len <= 1) {
    s.blocks.clear();
  } else {
    s.blocks = pool_.MatchPrefix(s.tokens, (s.length() - 1) / block_size, s.hashes);
  }
  s.computed = static_cast<int64_t>(s.blocks.size()) * block_size;
  // Admitted only if every block of what it has to compute is free, so a
  // prompt, once started, is never preempted by its own growth.
  const int64_t needed = KvBlocksFor(s.length(), block_size) - static_cast<int64_t>(s.blocks.size());
  if (pool_.available() < needed) {
    for (int32_t b : s.blocks) pool_.Release(b);
    s.blocks.clear();
    s.hashes.clear();
    s.computed = 0;
    return false;
  }
  Grow(s, s.length());
  const bool first = !s.counted;
  {
    absl::MutexLock lock(&mutex_);
    stats_.prefix_hit_tokens += s.computed;
    if (first) stats_.prompt_tokens += s.prompt_len;
  }
  s.counted = true;
  if (first && s.request.sink) {
    RequestEvent event;
    event.kind = RequestEvent::kScheduled;
    s.request.sink(event);
  }
  return true;
}

int64_t Engine::PieceOf(const Sequence& s, int64_t budget, bool& scoring) const {
  scoring = s.scoring();
  const int64_t end = scoring ? s.prompt_len - 1 : s.length();
  return std::min(end - s.computed, budget);
}

void Engine::Schedule(std::vector<Scheduled>& plan) {
  plan.clear();
  int64_t budget = options_.max_num_batched_tokens;
  bool preempted = false;
  const auto planned = [&](const Sequence* s) {
    return std::any_of(plan.begin(), plan.end(), [&](const Scheduled& p) { return p.sequence == s; });
  };
  // Running requests: decodes first (one token each), then pieces of
  // prompts started in earlier steps (and recomputations), oldest first.
  for (const bool decodes : {true, false}) {
    for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
      Sequence& s = *running_[i];
      bool scoring = false;
      const int64_t take = PieceOf(s, budget, scoring);
      const bool decode = !scoring && s.length() - s.computed == 1;
      if (decode != decodes || take <= 0 || planned(&s)) continue;
      bool preempted_self = false;
      while (!Grow(s, s.computed + take)) {
        Sequence* victim = Newest();
        const auto in_plan =
            std::find_if(plan.begin(), plan.end(), [&](const Scheduled& p) { return p.sequence == victim; });
        if (in_plan != plan.end()) {
          budget += in_plan->take;
          plan.erase(in_plan);
        }
        Preempt(*victim);
        preempted = true;
        if (victim == &s) {
          preempted_self = true;
          break;
        }
      }
      if (preempted_self) break;  // It was the last one running.
      plan.push_back({&s, take, scoring});
      budget -= take;
    }
  }
  // Then waiting requests, first come first served, while they fit; none
  // in a step that had to preempt (it would take back what was just freed).
  while (!preempted && !waiting_.empty() && budget > 0 &&
         static_cast<int>(running_.size()) < options_.max_num_seqs) {
    Sequence& s = *waiting_.front();
    if (!Admit(s)) break;
    if (s.admission == 0) s.guesses = GuessRecord(job_guesses_.rate());
    s.admission = ++admissions_;
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
    bool scoring = false;
    const int64_t take = PieceOf(s, budget, scoring);
    plan.push_back({&s, take, scoring});
    budget -= take;
  }
  // Last, guesses for the decodes, as many as are expected to pay for
  // their rows (speculation_policy.h).
  if (options_.speculative_tokens > 0) {
    // The step's expected tokens and rows, guesses counted as they come.
    double tokens = 0, draft_seconds = 0;
    int64_t rows = 0;
    for (const Scheduled& p : plan) {
      rows += p.take;
      tokens += IsDecode(p);
    }
    // How many each decode may guess, rows reserved as they are given.
    // Until steps of two sizes price a row, one request tries one guess in
    // every other step: steps that all carried the same guesses would never
    // show what a guess costs, and unpriced guesses can cost a lot. With a
    // draft model that request is the first decode (a request's first
    // guess has the draft read its whole text: 8 requests all trying at
    // once cost a job up to a third of its plain speed where the guesses
    // did not pay); with n-gram lookup, which costs nothing, the first
    // whose lookup finds a guess (below).
    const bool unpriced = options_.speculation_priced && !step_costs_.priced();
    const bool pricing = unpriced && guessed_last_step_;
    std::vector<GuessWant> wants;
    for (Scheduled& p : plan) {
      if (unpriced && draft_pool_.has_value() && !wants.empty()) break;
      if (!IsDecode(p) || budget <= 0 || pricing) continue;
      Sequence& s = *p.sequence;
      // A guess costs its row, and its draft step when a model drafts: the
      // first guess's step has the draft read the text it has not seen
      // (one or two tokens while the request guesses every step; its whole
      // prompt, or what it decoded meanwhile, after a pause), which prices
      // a probe. The step's time holds the draft steps of the guesses given
      // so far.
      const double catch_up =
          draft_pool_.has_value() ? draft_catch_up_costs_.Predict(s.length() - s.draft_computed) : 0.0;
      const double seconds = step_costs_.Predict(rows) + draft_seconds;
      const double per_token = seconds > 0 ? tokens / seconds : 0.0;
      const double per_row = step_costs_.per_row();
      const int64_t worth = options_.speculation_priced
                                ? s.guesses.Worth((per_row + draft_seconds_per_guess_) * per_token,
                                                  (per_row + catch_up) * per_token,
                                                  unpriced ? 1 : options_.speculative_tokens)
                                : options_.speculative_tokens;
      // The last guess must leave room for the pick after it.
      const int64_t room = std::min<int64_t>({budget, worth, s.limit - s.length() - 1});
      if (room <= 0) continue;
      wants.push_back({&p, room, {}});
      budget -= room;
      rows += room;
      if (draft_pool_.has_value()) draft_seconds += catch_up + draft_seconds_per_guess_ * static_cast<double>(room - 1);
      for (int64_t j = 1; j <= room; ++j) tokens += std::pow(s.guesses.rate(), static_cast<double>(j));
    }
    // The guesses, all requests' draft steps batched; then vetted.
    if (draft_pool_.has_value()) {
      Draft(wants);
    } else {
      bool tried = false;
      for (GuessWant& w : wants) {
        if (unpriced && tried) break;
        NgramLookup(w.scheduled->sequence->tokens, static_cast<int>(w.count), w.guesses);
        tried = !w.guesses.empty();
      }
    }
    for (GuessWant& w : wants) {
      Scheduled& p = *w.scheduled;
      p.proposed = Propose(*p.sequence, w.guesses);
      p.take += p.proposed;
      budget += w.count - p.proposed;
    }
  }
}

void Engine::CacheFullBlocks(Sequence& s) {
  const int64_t block_size = pool_.block_size();
  const int64_t full = std::min<int64_t>(s.computed / block_size, s.blocks.size());
  for (int64_t b = static_cast<int64_t>(s.hashes.size()); b < full; ++b) {
    const absl::Span<const int> tokens = absl::MakeConstSpan(s.tokens).subspan(b * block_size, block_size);
    const uint64_t hash = KvBlockPool::ChainHash(b == 0 ? 0 : s.hashes[b - 1], tokens);
    pool_.Cache(s.blocks[b], hash, tokens);
    s.hashes.push_back(hash);
  }
}

absl::StatusOr<int64_t> Engine::ScorePrompts(const std::vector<Scheduled>& plan) {
  const int64_t vocab = model_->limits().vocab_size;
  chunks_.clear();
  for (const Scheduled& p : plan) {
    if (!p.scoring) continue;
    Sequence& s = *p.sequence;
    chunks_.push_back({s.blocks, s.computed, absl::MakeConstSpan(s.tokens).subspan(s.computed, p.take), true});
  }
  if (chunks_.empty()) return 0;
  ASSIGN_OR_RETURN(absl::Span<const float> logits, model_->Forward(chunks_));
  const float* row = logits.data();
  int64_t computed = 0;
  for (const Scheduled& p : plan) {
    if (!p.scoring) continue;
    Sequence& s = *p.sequence;
    // Logits at position q score the prompt token at q + 1, and rank the
    // tokens that could have stood there.
    const int k = s.request.top_logprobs;
    for (int64_t i = 0; i < p.take; ++i, row += vocab) {
      const int64_t q = s.computed + i;
      s.prompt_logprobs[q + 1] = LogProb(row, vocab, s.tokens[q + 1]);
      if (k == 0) continue;
      int ids[kMaxTopLogprobs];
      float logprobs[kMaxTopLogprobs];
      TopLogProbs(row, vocab, k, ids, logprobs);
      for (int j = 0; j < k; ++j) s.prompt_top[(q + 1) * k + j] = {ids[j], logprobs[j]};
    }
    s.computed += p.take;
    computed += p.take;
  }
  return computed;
}

void Engine::ReleaseDraft(Sequence& s) {
  for (int32_t b : s.draft_blocks) draft_pool_->Release(b);
  s.draft_blocks.clear();
  s.draft_computed = 0;
}

void Engine::Draft(std::vector<GuessWant>& wants) {
  if (draft_failed_ || wants.empty()) return;
  LanguageModel& draft = *options_.draft_model;
  const ModelLimits& limits = draft.limits();
  // Each want's draft blocks for positions [0, length + count - 1): the
  // text, and every guess but the last fed back.
  for (GuessWant& w : wants) {
    Sequence& s = *w.scheduled->sequence;
    w.count = std::min<int64_t>(w.count, limits.max_seq_len - s.length() + 1);
    const int64_t needed = KvBlocksFor(s.length() + std::max<int64_t>(w.count, 1) - 1, limits.kv_block_size);
    while (w.count > 0 && static_cast<int64_t>(s.draft_blocks.size()) < needed) {
      std::optional<int32_t> block = draft_pool_->Allocate();
      if (!block.has_value()) {
        ReleaseDraft(s);  // Computed again from the start, when there is room.
        w.count = 0;
        break;
      }
      s.draft_blocks.push_back(*block);
    }
  }
  // One batched call per round. Round 0 brings each draft up to its text
  // (a piece of what it has not seen, within the draft's step: a long
  // prompt does not hold the step up, and a request still catching up
  // guesses nothing this step) and picks the first guesses; each later
  // round feeds every request its last guess and picks the next.
  std::vector<std::vector<int>> feeds(wants.size());
  std::vector<size_t> in_call;
  std::vector<SequenceChunk> chunks;
  std::vector<TokenChoice> greedy;
  std::vector<ChosenToken> chosen;
  for (int64_t round = 0;; ++round) {
    in_call.clear();
    chunks.clear();
    int64_t step_tokens = limits.max_step_tokens;
    for (size_t i = 0; i < wants.size() && static_cast<int>(chunks.size()) < limits.max_batch_size; ++i) {
      GuessWant& w = wants[i];
      Sequence& s = *w.scheduled->sequence;
      if (static_cast<int64_t>(w.guesses.size()) >= w.count || (round > 0 && w.guesses.empty())) continue;
      int64_t take = 1;
      if (round == 0) {
        take = std::min(s.length() - s.draft_computed, step_tokens);
        if (take <= 0) continue;
        feeds[i].assign(s.tokens.begin() + s.draft_computed, s.tokens.begin() + s.draft_computed + take);
      } else {
        feeds[i].assign(1, w.guesses.back());
      }
      step_tokens -= take;
      in_call.push_back(i);
      chunks.push_back({s.draft_blocks, s.draft_computed, feeds[i], false});
    }
    if (chunks.empty()) break;
    greedy.assign(chunks.size(), TokenChoice{});
    chosen.resize(chunks.size());
    const auto start = std::chrono::steady_clock::now();
    if (const absl::Status status = draft.ForwardAndChoose(chunks, greedy, absl::MakeSpan(chosen)); !status.ok()) {
      // Speed only: the requests go on without guesses, and the engine
      // stops drafting rather than fail again at every step.
      LOG(ERROR) << "the draft model failed; speculative decoding is off from here: " << status;
      draft_failed_ = true;
      for (GuessWant& w : wants) {
        ReleaseDraft(*w.scheduled->sequence);
        w.guesses.clear();
      }
      return;
    }
    const double round_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (round == 0) {
      // What bringing drafts up to their texts costs, by the tokens read.
      int64_t fed = 0;
      for (const size_t i : in_call) fed += static_cast<int64_t>(feeds[i].size());
      draft_catch_up_costs_.Observe(fed, round_seconds);
    } else {
      // What a further guess costs: a round's time shared by its guesses.
      const double per_guess = round_seconds / static_cast<double>(chunks.size());
      draft_seconds_per_guess_ =
          draft_seconds_per_guess_ == 0 ? per_guess : draft_seconds_per_guess_ + 0.1 * (per_guess - draft_seconds_per_guess_);
    }
    for (size_t c = 0; c < in_call.size(); ++c) {
      GuessWant& w = wants[in_call[c]];
      Sequence& s = *w.scheduled->sequence;
      s.draft_computed += static_cast<int64_t>(feeds[in_call[c]].size());
      // A piece short of the text: its pick is not a guess.
      if (s.draft_computed < s.length() || chosen[c].token < 0 || chosen[c].token >= model_->limits().vocab_size) {
        w.count = static_cast<int64_t>(w.guesses.size());
        continue;
      }
      w.guesses.push_back(chosen[c].token);
    }
  }
  // Each draft's cache now holds its text and the guesses it fed itself
  // (all but the last); Propose and the verification take back those
  // that do not hold.
}

bool Engine::IsDecode(const Scheduled& p) {
  return !p.scoring && p.sequence->length() - p.sequence->computed == 1;
}

int64_t Engine::Propose(Sequence& s, const std::vector<int>& guesses) {
  s.verify.clear();
  // No stop token (the model's pick ends the request there anyway), and
  // only what the grammar allows, in order.
  const std::vector<int>& stops = s.request.stop_ids;
  int64_t kept = 0;
  std::optional<grammar::TokenMatcher> probe;
  if (s.request.grammar != nullptr) probe.emplace(*s.request.grammar);
  for (const int g : guesses) {
    if (std::find(stops.begin(), stops.end(), g) != stops.end()) break;
    // The mask decides, as for the pick (Accept alone would pass a token
    // of no bytes, which no mask allows).
    if (probe.has_value()) {
      if (probe->complete() || !grammar::MaskHas(probe->Allowed()->data(), g) || !probe->Accept(g).ok()) break;
    }
    ++kept;
  }
  Grow(s, s.computed + 1 + kept, /*evict=*/false);
  kept = std::max<int64_t>(0, std::min<int64_t>(kept, static_cast<int64_t>(s.blocks.size()) * pool_.block_size() -
                                                          s.computed - 1));
  // The draft's cache holds the guesses it fed itself; past the ones
  // verified now, they are not the text.
  if (draft_pool_.has_value()) s.draft_computed = std::min(s.draft_computed, s.length() + kept);
  if (kept <= 0) return 0;
  s.verify.push_back(s.tokens.back());
  s.verify.insert(s.verify.end(), guesses.begin(), guesses.begin() + kept);
  return kept;
}

void Engine::AddChoices(Sequence& s, bool chooses, int64_t proposed) {
  const SamplingParams& sampling = s.request.sampling;
  s.row_adjustments.resize(proposed + 1);
  s.row_masks.resize(proposed + 1);
  if (proposed > 0) s.rng_before_guesses = s.rng;
  std::optional<grammar::TokenMatcher> probe;
  if (s.request.grammar != nullptr) probe.emplace(*s.request.grammar);
  // Row j chooses as plain decoding would after guesses 1..j: they are
  // appended for the choice and taken back after it.
  for (int64_t j = 0; j <= proposed; ++j) {
    if (j > 0) {
      const int guess = s.verify[j];
      s.tokens.push_back(guess);
      if (s.penalized()) ++s.generated_counts[guess];
      if (probe.has_value()) probe->Accept(guess).IgnoreError();  // Vetted by Propose.
    }
    TokenChoice choice;
    choice.sampling = sampling.token;
    choice.top_logprobs = s.request.top_logprobs;
    // One draw per token the request samples, whatever the step's shape.
    if (choice.sampling.temperature > 0 && chooses) choice.uniform = s.rng.Uniform();
    s.row_adjustments[j].clear();
    if (s.adjusted() && chooses) s.UpdateAdjustments(s.row_adjustments[j]);
    choice.adjustments = s.row_adjustments[j];
    s.row_masks[j].reset();
    if (probe.has_value() && chooses) {
      s.row_masks[j] = probe->Allowed();
      choice.allowed = s.row_masks[j]->data();
      if (probe->accepting()) choice.also_allowed = s.request.stop_ids;
    }
    choices_.push_back(choice);
  }
  for (int64_t j = proposed; j > 0; --j) {
    const int guess = s.tokens.back();
    s.tokens.pop_back();
    if (s.penalized() && --s.generated_counts[guess] == 0) s.generated_counts.erase(guess);
  }
}

absl::Status Engine::ChooseTokens(const std::vector<Scheduled>& plan) {
  chunks_.clear();
  choices_.clear();
  for (const Scheduled& p : plan) {
    if (p.scoring) continue;
    Sequence& s = *p.sequence;
    const absl::Span<const int> tokens =
        p.proposed > 0 ? absl::MakeConstSpan(s.verify) : absl::MakeConstSpan(s.tokens).subspan(s.computed, p.take);
    chunks_.push_back({s.blocks, s.computed, tokens, false, p.proposed});
    AddChoices(s, /*chooses=*/s.computed + p.take - p.proposed == s.length(), p.proposed);
  }
  if (chunks_.empty()) return absl::OkStatus();
  chosen_.resize(choices_.size());
  return model_->ForwardAndChoose(chunks_, choices_, absl::MakeSpan(chosen_));
}

void Engine::AfterScoring(Sequence& s) {
  CacheFullBlocks(s);
  // Scored to its end: reported once, before its first token.
  ReportPromptLogprobs(s);
  if (s.prompt_scored && s.prompt_len >= s.limit) Finish(s, FinishReason::kLength);
}

int64_t Engine::AcceptChosen(Sequence& s, const Scheduled& p, absl::Span<const ChosenToken> chosen) {
  s.computed += p.take - p.proposed;
  CacheFullBlocks(s);
  if (s.computed < s.length()) return 0;  // More prompt to feed.
  ReportPromptLogprobs(s);  // A one-token prompt's: nothing was scored.
  // Row j's pick follows guesses 1..j: it counts while they were all
  // confirmed, and confirms guess j + 1 (whose keys and values the step
  // computed) when it is that token.
  int64_t appended = 0;
  bool confirmed = true;
  while (confirmed && Append(s, chosen[appended++])) {
    confirmed = appended <= p.proposed && s.tokens.back() == s.verify[appended];
    if (confirmed) ++s.computed;
  }
  if (p.proposed == 0) return appended;
  const int64_t accepted = appended - 1;
  // The draws of rows after the last pick kept are the next tokens' again.
  if (s.request.sampling.token.temperature > 0) {
    s.rng = s.rng_before_guesses;
    for (int64_t i = 0; i < appended; ++i) s.rng.Uniform();
  }
  s.guesses.Update(p.proposed, accepted);
  job_guesses_.Update(p.proposed, accepted);
  // The draft's cache holds the text up to the last guess kept.
  s.draft_computed = std::min(s.draft_computed, s.length() - 1);
  if (!s.finished) {
    CacheFullBlocks(s);
    // Blocks taken for guesses that failed go back.
    while (static_cast<int64_t>(s.blocks.size()) > KvBlocksFor(s.length(), pool_.block_size())) {
      pool_.Release(s.blocks.back());
      s.blocks.pop_back();
    }
  }
  absl::MutexLock lock(&mutex_);
  stats_.proposed_tokens += p.proposed;
  stats_.accepted_tokens += accepted;
  return appended;
}

bool Engine::Append(Sequence& s, const ChosenToken& chosen) {
  s.tokens.push_back(chosen.token);
  if (s.penalized()) ++s.generated_counts[chosen.token];
  RequestEvent event;
  event.token = chosen.token;
  event.logprob = chosen.logprob;
  event.top = absl::MakeConstSpan(chosen.top.data(), chosen.top_count);
  if (s.request.sink) s.request.sink(event);
  const std::vector<int>& stops = s.request.stop_ids;
  if (std::find(stops.begin(), stops.end(), chosen.token) != stops.end()) {
    Finish(s, FinishReason::kStop);
    return false;
  }
  if (s.request.grammar != nullptr && !AcceptByGrammar(s, chosen.token)) {
    return false;  // Ended by the grammar: complete, or (a bug) a token it did not allow.
  }
  if (s.length() >= s.limit) {
    Finish(s, FinishReason::kLength);
    return false;
  }
  return true;
}

bool Engine::AcceptByGrammar(Sequence& s, int token) {
  s.row_masks.clear();
  if (absl::Status accepted = s.request.grammar->Accept(token); !accepted.ok()) {
    Finish(s, FinishReason::kError, accepted);
    return false;
  }
  if (!s.request.grammar->complete()) return true;
  Finish(s, FinishReason::kStop);
  return false;
}

absl::Status Engine::Run(const std::vector<Scheduled>& plan) {
  ASSIGN_OR_RETURN(int64_t computed, ScorePrompts(plan));
  RETURN_IF_ERROR(ChooseTokens(plan));
  int64_t generated = 0;
  size_t c = 0;
  for (const Scheduled& p : plan) {
    if (p.scoring) {
      AfterScoring(*p.sequence);
      continue;
    }
    computed += p.take;
    generated += AcceptChosen(*p.sequence, p, absl::MakeConstSpan(chosen_).subspan(c, p.proposed + 1));
    c += p.proposed + 1;
  }
  absl::MutexLock lock(&mutex_);
  stats_.computed_tokens += computed;
  stats_.generated_tokens += generated;
  return absl::OkStatus();
}

void Engine::Fail(const absl::Status& status) {
  {
    absl::MutexLock lock(&mutex_);
    failed_ = status;
    for (auto& s : submitted_) waiting_.push_back(std::move(s));
    submitted_.clear();
  }
  for (auto& s : running_) Finish(*s, FinishReason::kError, status);
  for (auto& s : waiting_) Finish(*s, FinishReason::kError, status);
  running_.clear();
  waiting_.clear();
}

absl::Status Engine::Step() {
  {
    absl::MutexLock lock(&mutex_);
    if (!failed_.ok()) return failed_;
  }
  Intake();
  std::vector<Scheduled> plan;
  Schedule(plan);
  if (!plan.empty()) {
    // What decode steps cost by their rows, for the guesses' worth.
    const bool decodes_only = std::all_of(plan.begin(), plan.end(), [](const Scheduled& p) { return IsDecode(p); });
    int64_t rows = 0;
    for (const Scheduled& p : plan) rows += p.take;
    const auto start = std::chrono::steady_clock::now();
    const absl::Status status = Run(plan);
    if (!status.ok()) {
      Fail(status);
      return status;
    }
    if (decodes_only && options_.speculative_tokens > 0) {
      step_costs_.Observe(rows, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      guessed_last_step_ = std::any_of(plan.begin(), plan.end(), [](const Scheduled& p) { return p.proposed > 0; });
    }
  }
  RemoveFinished();
  absl::MutexLock lock(&mutex_);
  ++stats_.steps;
  stats_.running = static_cast<int>(running_.size());
  stats_.waiting = static_cast<int>(waiting_.size() + submitted_.size());
  stats_.kv_blocks_used = pool_.in_use();
  return absl::OkStatus();
}

absl::Status Engine::RunUntilIdle() {
  while (!idle()) RETURN_IF_ERROR(Step());
  return absl::OkStatus();
}

}  // namespace llama
