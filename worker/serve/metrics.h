// The server's Prometheus metrics (GET /metrics), named after vLLM's:
// requests running and waiting, KV blocks, prefix-cache hits, token
// totals, failures by reason, and latency histograms. Each histogram
// counts exactly what it describes: time to first token and queue time
// once per sequence (a request's choice, as vLLM counts them) that got that
// far, end-to-end latency once per answered request, inter-token latency
// once per token after a sequence's first.

#ifndef LLAMA_WORKER_SERVE_METRICS_H_
#define LLAMA_WORKER_SERVE_METRICS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "worker/engine/engine.h"

namespace llama {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void Observe(double value);
  // The _bucket, _sum and _count lines.
  void Render(const std::string& name, std::string& out) const;
  int64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // Per bucket, not cumulative; the last is +Inf.
  double sum_ = 0;
  int64_t count_ = 0;
};

class ServerMetrics {
 public:
  ServerMetrics();

  void RequestArrived();
  void Scheduled(double queue_seconds);
  void FirstToken(double seconds);
  void NextToken(double seconds);
  void Finished(double seconds, int64_t prompt_tokens, int64_t generated_tokens);
  // A request that ended without a result: "invalid", "auth", "queue_full",
  // "unavailable", "cancelled", "engine".
  void Failed(const std::string& reason);

  // The text exposition, engine gauges included.
  std::string Render(const EngineStats& engine) const;

 private:
  mutable absl::Mutex mutex_;
  int64_t arrived_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t succeeded_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t prompt_tokens_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t generated_tokens_ ABSL_GUARDED_BY(mutex_) = 0;
  std::map<std::string, int64_t> failures_ ABSL_GUARDED_BY(mutex_);
  Histogram ttft_ ABSL_GUARDED_BY(mutex_);
  Histogram itl_ ABSL_GUARDED_BY(mutex_);
  Histogram e2e_ ABSL_GUARDED_BY(mutex_);
  Histogram queue_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace llama

#endif  // LLAMA_WORKER_SERVE_METRICS_H_
