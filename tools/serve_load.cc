#include "tools/serve_load.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace llama {

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

double Quantile(std::vector<double>& values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, static_cast<size_t>(q * (values.size() - 1) + 0.5))];
}

std::string Summary(std::vector<double>& values, int digits, const char* unit) {
  double mean = 0;
  for (double v : values) mean += v / std::max<size_t>(1, values.size());
  return absl::StrFormat("mean %.*f, p50 %.*f, p99 %.*f %s", digits, mean, digits, Quantile(values, 0.5), digits,
                         Quantile(values, 0.99), unit);
}

std::vector<double> Arrivals(const LoadShape& load, std::mt19937_64& random) {
  std::vector<double> arrival(load.requests, 0.0);
  std::exponential_distribution<double> gap(load.request_rate > 0 ? load.request_rate : 1.0);
  double at = 0;
  for (double& a : arrival) {
    if (load.request_rate > 0) at += gap(random);
    a = at;
  }
  return arrival;
}

int PromptLength(const LoadShape& load, std::mt19937_64& random) {
  return std::max(1, load.prompt_tokens / 2 + static_cast<int>(random() % (load.prompt_tokens + 1)));
}

void ReportLatencies(const LoadShape& load, const std::vector<Timing>& timing, double wall) {
  std::vector<double> ttft, tpot, latency, itl;
  int64_t tokens = 0;
  int ok = 0, rejected = 0, failed = 0;
  for (const Timing& t : timing) {
    if (t.status == 429) ++rejected;
    if (t.status != 200 || t.tokens == 0) {
      failed += t.status != 429;
      continue;
    }
    ++ok;
    tokens += t.tokens;
    ttft.push_back(1e3 * Seconds(t.first_token - t.arrival));
    latency.push_back(Seconds(t.last_token - t.arrival));
    if (t.tokens > 1) tpot.push_back(1e3 * Seconds(t.last_token - t.first_token) / (t.tokens - 1));
    for (double g : t.gaps) itl.push_back(1e3 * g);
  }
  const std::string prompts = load.prompts_file.empty()
                                  ? absl::StrFormat("~%d prompt", load.shared_prefix_tokens + load.prompt_tokens)
                                  : absl::StrCat("prompts of ", load.prompts_file, ",");
  std::printf("load:         %d requests, %s + %d output tokens each, rate %s, concurrency %s\n", load.requests,
              prompts.c_str(), load.output_tokens,
              load.request_rate > 0 ? absl::StrFormat("%.2f/s", load.request_rate).c_str() : "all at once",
              load.max_concurrency > 0 ? absl::StrCat(load.max_concurrency).c_str() : "unlimited");
  std::printf("throughput:   %.2f output tokens/s, %.3f requests/s, %.1f s in all\n", tokens / wall, ok / wall, wall);
  std::printf("answered:     %d; %d rejected with 429; %d failed\n", ok, rejected, failed);
  std::printf("TTFT:         %s\n", Summary(ttft, 0, "ms").c_str());
  std::printf("TPOT:         %s\n", Summary(tpot, 1, "ms").c_str());
  if (!itl.empty()) std::printf("ITL:          %s (between streamed chunks)\n", Summary(itl, 1, "ms").c_str());
  std::printf("latency:      %s\n", Summary(latency, 2, "s").c_str());
}

}  // namespace llama
