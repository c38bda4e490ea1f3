#include "worker/serve/metrics.h"

#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace llama {
namespace {

const std::vector<double> kLatencyBounds = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
                                            0.75,  1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0};

void Gauge(const char* name, const char* help, const char* type, double value, std::string& out) {
  absl::StrAppend(&out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n", name, " ",
                  absl::StrFormat("%.17g", value), "\n");
}

}  // namespace

void Histogram::Observe(double value) {
  size_t b = 0;
  while (b < bounds_.size() && value > bounds_[b]) ++b;
  ++counts_[b];
  sum_ += value;
  ++count_;
}

void Histogram::Render(const std::string& name, std::string& out) const {
  int64_t cumulative = 0;
  for (size_t b = 0; b <= bounds_.size(); ++b) {
    cumulative += counts_[b];
    const std::string le = b < bounds_.size() ? absl::StrFormat("%g", bounds_[b]) : "+Inf";
    absl::StrAppend(&out, name, "_bucket{le=\"", le, "\"} ", cumulative, "\n");
  }
  absl::StrAppend(&out, name, "_sum ", absl::StrFormat("%.17g", sum_), "\n", name, "_count ", count_, "\n");
}

ServerMetrics::ServerMetrics()
    : ttft_(kLatencyBounds), itl_(kLatencyBounds), e2e_(kLatencyBounds), queue_(kLatencyBounds) {}

void ServerMetrics::RequestArrived() {
  absl::MutexLock lock(&mutex_);
  ++arrived_;
}

void ServerMetrics::Scheduled(double queue_seconds) {
  absl::MutexLock lock(&mutex_);
  queue_.Observe(queue_seconds);
}

void ServerMetrics::FirstToken(double seconds) {
  absl::MutexLock lock(&mutex_);
  ttft_.Observe(seconds);
}

void ServerMetrics::NextToken(double seconds) {
  absl::MutexLock lock(&mutex_);
  itl_.Observe(seconds);
}

void ServerMetrics::Finished(double seconds, int64_t prompt_tokens, int64_t generated_tokens) {
  absl::MutexLock lock(&mutex_);
  ++succeeded_;
  e2e_.Observe(seconds);
  prompt_tokens_ += prompt_tokens;
  generated_tokens_ += generated_tokens;
}

void ServerMetrics::Failed(const std::string& reason) {
  absl::MutexLock lock(&mutex_);
  ++failures_[reason];
}

std::string ServerMetrics::Render(const EngineStats& engine) const {
  absl::MutexLock lock(&mutex_);
  std::string out;
  Gauge("llama_num_requests_running", "Requests the engine is running.", "gauge", engine.running, out);
  Gauge("llama_num_requests_waiting", "Requests waiting for the engine.", "gauge", engine.waiting, out);
  Gauge("llama_kv_cache_blocks_used", "KV cache blocks held by requests.", "gauge", engine.kv_blocks_used, out);
  Gauge("llama_kv_cache_blocks_total", "KV cache blocks.", "gauge", engine.kv_blocks_total, out);
  Gauge("llama_prefix_cache_hit_tokens_total", "Prompt tokens taken from cached blocks.", "counter",
        engine.prefix_hit_tokens, out);
  Gauge("llama_num_preemptions_total", "Requests preempted for KV blocks.", "counter", engine.preemptions, out);
  // vLLM's names, labelled by where the guesses come from; only when the
  // engine guesses, as vLLM shows them only then.
  if (!engine.speculation_source.empty()) {
    const std::tuple<const char*, const char*, int64_t> counters[] = {
        {"llama_spec_decode_num_draft_tokens_total", "Speculative tokens guessed and verified.",
         engine.proposed_tokens},
        {"llama_spec_decode_num_accepted_tokens_total", "Speculative tokens the model confirmed.",
         engine.accepted_tokens}};
    for (const auto& [name, help, value] : counters) {
      absl::StrAppend(&out, "# HELP ", name, " ", help, "\n# TYPE ", name, " counter\n", name, "{source=\"",
                      engine.speculation_source, "\"} ", value, "\n");
    }
  }
  Gauge("llama_requests_total", "Generation requests received.", "counter", arrived_, out);
  Gauge("llama_request_success_total", "Generation requests answered in full.", "counter", succeeded_, out);
  Gauge("llama_prompt_tokens_total", "Prompt tokens of answered requests.", "counter", prompt_tokens_, out);
  Gauge("llama_generation_tokens_total", "Tokens generated for answered requests.", "counter", generated_tokens_,
        out);
  absl::StrAppend(&out, "# HELP llama_request_failure_total Requests that ended without a result.\n",
                  "# TYPE llama_request_failure_total counter\n");
  for (const auto& [reason, count] : failures_) {
    absl::StrAppend(&out, "llama_request_failure_total{reason=\"", reason, "\"} ", count, "\n");
  }
  for (const auto& [name, help, histogram] :
       {std::tuple<const char*, const char*, const Histogram*>{"llama_time_to_first_token_seconds",
                                                               "Arrival to first token.", &ttft_},
        {"llama_inter_token_latency_seconds", "Between consecutive tokens of a request.", &itl_},
        {"llama_e2e_request_latency_seconds", "Arrival to last token, per answered request.", &e2e_},
        {"llama_request_queue_time_seconds", "Arrival to first scheduled.", &queue_}}) {
    absl::StrAppend(&out, "# HELP ", name, " ", help, "\n# TYPE ", name, " histogram\n");
    histogram->Render(name, out);
  }
  return out;
}

}  // namespace llama
