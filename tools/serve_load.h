// The load //tools:serve_bench puts on an engine or a server, as vLLM's
// `bench serve` shapes it (open-loop arrivals, random prompts of about a
// length with an optional shared prefix, a fixed number of output tokens),
// and the report of how its requests fared.

#ifndef LLAMA_TOOLS_SERVE_LOAD_H_
#define LLAMA_TOOLS_SERVE_LOAD_H_

#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace llama {

// Filled from serve_bench's flags, which hold the defaults.
struct LoadShape {
  int requests = 0;
  double request_rate = 0;  // Per second, Poisson arrivals; 0: all at once.
  int max_concurrency = 0;  // Most requests in flight from the client's side; 0: no limit.
  int prompt_tokens = 0;    // About: uniform in [prompt_tokens / 2, 3 * prompt_tokens / 2].
  int shared_prefix_tokens = 0;
  int output_tokens = 0;
  std::string prompts_file;  // Prompts given instead of random ones (over HTTP).
  uint64_t bench_seed = 0;   // Seeds the prompts and arrival times.
};

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d);
// The q-quantile of `values` (sorted in place), 0 if none.
double Quantile(std::vector<double>& values, double q);
// "mean M, p50 A, p99 B <unit>" of `values`, with `digits` decimals.
std::string Summary(std::vector<double>& values, int digits, const char* unit);

// One request's times.
struct Timing {
  Clock::time_point arrival, first_token, last_token;
  int64_t tokens = 0;
  bool done = false;
  // HTTP: gaps between chunks that carried text, and how it ended.
  std::vector<double> gaps;
  int status = 200;  // An HTTP status, or 0: no answer.
};

// When each request arrives (seconds from the start): all at once, or
// Poisson at the request rate.
std::vector<double> Arrivals(const LoadShape& load, std::mt19937_64& random);
// A random prompt's length: uniform in [prompt_tokens / 2, 3 * prompt_tokens / 2].
int PromptLength(const LoadShape& load, std::mt19937_64& random);

// Prints the load line, throughput and latencies of finished requests.
void ReportLatencies(const LoadShape& load, const std::vector<Timing>& timing, double wall);

}  // namespace llama

#endif  // LLAMA_TOOLS_SERVE_LOAD_H_
