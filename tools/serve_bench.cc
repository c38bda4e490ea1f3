// //tools:serve_bench: the serving engine under load, without HTTP, as
// vLLM's `bench serve` measures a server: requests arrive open-loop at
// --request_rate (Poisson; 0: all at once), at most --max_concurrency in
// flight, each with a random prompt of about --prompt_tokens (the first
// --shared_prefix_tokens the same for all, as a system prompt) and exactly
// --output_tokens to generate (no stop token), greedy. Prints output
// tokens/s, time to first token and time per output token (p50, p99),
// request latency, the most requests and KV blocks in use at once,
// preemptions and the prefix-cache hit rate.
//
//   serve_bench --requests=16 --max_concurrency=1     one request at a time
//   serve_bench --requests=16 --max_concurrency=16    sixteen together
//   serve_bench --kv_cache_gb=... --requests=64        how many fit
//
// One rank, on the model of //tools:bench (synthetic TinyLlama-shaped by
// default, or --shard), built as the worker builds it.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include <gflags/gflags.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ops/status_macros.h"
#include "tools/bench_model.h"
#include "tools/tool_main.h"
#include "worker/engine/engine.h"
#include "worker/job_flags.h"
#include "worker/model/model_options.h"
#include "worker/rank_model.h"

DEFINE_int32(requests, 16, "Requests to send.");
DEFINE_double(request_rate, 0, "Requests per second, Poisson arrivals; 0: all at once.");
DEFINE_int32(max_concurrency, 0, "Most requests in flight from the client's side; 0: no limit.");
DEFINE_int32(prompt_tokens, 128, "Prompt length: uniform in [prompt_tokens / 2, 3 * prompt_tokens / 2].");
DEFINE_int32(shared_prefix_tokens, 0, "Leading prompt tokens that every request shares.");
DEFINE_int32(output_tokens, 64, "Tokens each request generates.");
DEFINE_uint64(bench_seed, 1, "Seeds the prompts and arrival times.");

namespace llama {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// The q-quantile of `values` (sorted in place), 0 if none.
double Quantile(std::vector<double>& values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, static_cast<size_t>(q * (values.size() - 1) + 0.5))];
}

struct Timing {
  Clock::time_point arrival, first_token, last_token;
  int64_t tokens = 0;
  bool done = false;
};

absl::Status Run() {
  const JobFlags flags = JobFlagsFromCommandLine();
  RETURN_IF_ERROR(CheckJobFlags(flags, /*need_input=*/false));
  for (const auto& [name, value] : {std::pair<const char*, int>{"requests", FLAGS_requests},
                                    {"prompt_tokens", FLAGS_prompt_tokens},
                                    {"output_tokens", FLAGS_output_tokens}}) {
    if (value < 1) return absl::InvalidArgumentError(absl::StrFormat("--%s=%d: expected at least 1", name, value));
  }
  if (FLAGS_shared_prefix_tokens < 0 || FLAGS_max_concurrency < 0 || !(FLAGS_request_rate >= 0)) {
    return absl::InvalidArgumentError("--shared_prefix_tokens, --max_concurrency and --request_rate must be >= 0");
  }
  const int64_t longest = FLAGS_shared_prefix_tokens + 3 * FLAGS_prompt_tokens / 2 + FLAGS_output_tokens;
  if (longest > flags.max_seq_len) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a request may take %d positions (shared prefix + 1.5 x --prompt_tokens + --output_tokens) but "
        "--max_seq_len=%d",
        longest, flags.max_seq_len));
  }

  ASSIGN_OR_RETURN(const Device device, ChooseDevice(flags.device));
  ASSIGN_OR_RETURN(ModelWeights weights, BenchModelWeights(0, 1));
  const ModelConfig config = weights.config;
  const DType weight_dtype = weights.layers[0].wq.dtype();
  TransformerOptions options;
  ASSIGN_OR_RETURN(options.kv_cache_dtype, ParseFloat16Or32Flag("kv_cache_dtype", flags.kv_cache_dtype));
  options.cuda_graphs = flags.cuda_graphs;
  options.max_batch_size = flags.max_batch_size;
  options.max_seq_len = flags.max_seq_len;
  options.max_step_tokens = std::max(flags.max_num_batched_tokens, flags.max_batch_size);
  options.kv_block_size = flags.kv_block_size;
  options.threads = flags.threads;
  if (flags.kv_cache_gb > 0) {
    ASSIGN_OR_RETURN(const RankGeometry geometry, ComputeRankGeometry(config, 0, 1));
    options.kv_blocks = std::max<int64_t>(1, KvBlocksInBytes(geometry, options, flags.kv_cache_gb * 1e9));
  }
  RendezvousOptions alone;
  alone.world_size = 1;
  ASSIGN_OR_RETURN(RankPeers peers, JoinPeers(alone, 0));
  ASSIGN_OR_RETURN(RankModel made, CreateRankModel(device, peers, std::move(weights), options,
                                                   std::chrono::seconds(flags.collective_timeout)));
  EngineOptions engine_options;
  engine_options.prefix_caching = flags.enable_prefix_caching;
  Engine engine(made.model.get(), engine_options);

  // The requests, and when each arrives (seconds from the start).
  std::mt19937_64 random(FLAGS_bench_seed);
  const auto token = [&] { return 3 + static_cast<int>(random() % (config.vocab_size - 3)); };
  std::vector<int> shared(FLAGS_shared_prefix_tokens);
  for (int& t : shared) t = token();
  std::vector<std::vector<int>> prompts(FLAGS_requests);
  std::vector<double> arrival(FLAGS_requests, 0.0);
  std::exponential_distribution<double> gap(FLAGS_request_rate > 0 ? FLAGS_request_rate : 1.0);
  double at = 0;
  for (int i = 0; i < FLAGS_requests; ++i) {
    prompts[i] = shared;
    const int length = FLAGS_prompt_tokens / 2 + static_cast<int>(random() % (FLAGS_prompt_tokens + 1));
    for (int k = 0; k < std::max(1, length); ++k) prompts[i].push_back(token());
    if (FLAGS_request_rate > 0) at += gap(random);
    arrival[i] = at;
  }

  std::vector<Timing> timing(FLAGS_requests);
  int submitted = 0, finished = 0, most_running = 0;
  int64_t most_blocks = 0;
  const Clock::time_point start = Clock::now();
  while (finished < FLAGS_requests) {
    const double now = Seconds(Clock::now() - start);
    while (submitted < FLAGS_requests && arrival[submitted] <= now &&
           (FLAGS_max_concurrency == 0 || submitted - finished < FLAGS_max_concurrency)) {
      const int i = submitted++;
      EngineRequest request;
      request.prompt = prompts[i];
      request.max_new_tokens = FLAGS_output_tokens;
      timing[i].arrival = Clock::now();
      request.sink = [&timing, &finished, i](const RequestEvent& e) {
        Timing& t = timing[i];
        if (e.kind == RequestEvent::kToken) {
          t.last_token = Clock::now();
          if (t.tokens++ == 0) t.first_token = t.last_token;
        } else if (e.kind == RequestEvent::kFinished) {
          t.done = true;
          ++finished;
        }
      };
      RETURN_IF_ERROR(engine.Submit(std::move(request)).status());
    }
    if (engine.idle()) {
      // Waiting for the next arrival.
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      continue;
    }
    RETURN_IF_ERROR(engine.Step());
    const EngineStats s = engine.stats();
    most_running = std::max(most_running, s.running);
    most_blocks = std::max(most_blocks, s.kv_blocks_used);
  }
  const double wall = Seconds(Clock::now() - start);

  std::vector<double> ttft, tpot, latency;
  int64_t tokens = 0;
  for (const Timing& t : timing) {
    tokens += t.tokens;
    ttft.push_back(1e3 * Seconds(t.first_token - t.arrival));
    latency.push_back(Seconds(t.last_token - t.arrival));
    if (t.tokens > 1) tpot.push_back(1e3 * Seconds(t.last_token - t.first_token) / (t.tokens - 1));
  }
  const EngineStats s = engine.stats();
  std::printf("model:        dim %lld, %lld layers, vocab %lld, %s; %s\n", static_cast<long long>(config.dim),
              static_cast<long long>(config.n_layers), static_cast<long long>(config.vocab_size),
              FLAGS_shard.empty() ? absl::StrCat("synthetic ", DTypeName(weight_dtype)).c_str() : FLAGS_shard.c_str(),
              device == Device::kCuda
                  ? "cuda"
                  : absl::StrFormat("cpu, %d thread(s)", flags.threads > 0 ? flags.threads
                                                                          : static_cast<int>(
                                                                                std::thread::hardware_concurrency()))
                        .c_str());
  std::printf("KV cache:     %lld blocks of %lld positions (%lld positions), --max_batch_size=%d, "
              "--max_num_batched_tokens=%lld, prefix caching %s\n",
              static_cast<long long>(s.kv_blocks_total), static_cast<long long>(made.model->kv_block_size()),
              static_cast<long long>(s.kv_blocks_total * made.model->kv_block_size()), flags.max_batch_size,
              static_cast<long long>(options.max_step_tokens), flags.enable_prefix_caching ? "on" : "off");
  std::printf("load:         %d requests, ~%d prompt + %d output tokens each, rate %s, concurrency %s\n",
              FLAGS_requests, FLAGS_shared_prefix_tokens + FLAGS_prompt_tokens, FLAGS_output_tokens,
              FLAGS_request_rate > 0 ? absl::StrFormat("%.2f/s", FLAGS_request_rate).c_str() : "all at once",
              FLAGS_max_concurrency > 0 ? absl::StrCat(FLAGS_max_concurrency).c_str() : "unlimited");
  std::printf("throughput:   %.2f output tokens/s, %.3f requests/s, %.1f s in all\n", tokens / wall,
              FLAGS_requests / wall, wall);
  const double ttft50 = Quantile(ttft, 0.5), ttft99 = Quantile(ttft, 0.99);
  const double tpot50 = Quantile(tpot, 0.5), tpot99 = Quantile(tpot, 0.99);
  const double e2e50 = Quantile(latency, 0.5), e2e99 = Quantile(latency, 0.99);
  std::printf("TTFT:         p50 %.0f ms, p99 %.0f ms\n", ttft50, ttft99);
  std::printf("TPOT:         p50 %.1f ms, p99 %.1f ms\n", tpot50, tpot99);
  std::printf("latency:      p50 %.2f s, p99 %.2f s\n", e2e50, e2e99);
  std::printf("at once:      %d requests running, %lld of %lld KV blocks in use; %lld preemptions\n", most_running,
              static_cast<long long>(most_blocks), static_cast<long long>(s.kv_blocks_total),
              static_cast<long long>(s.preemptions));
  std::printf("prefix cache: %.1f%% of prompt tokens reused (%lld of %lld)\n",
              s.prompt_tokens > 0 ? 100.0 * s.prefix_hit_tokens / s.prompt_tokens : 0.0,
              static_cast<long long>(s.prefix_hit_tokens), static_cast<long long>(s.prompt_tokens));
  return absl::OkStatus();
}

}  // namespace
}  // namespace llama

int main(int argc, char** argv) {
  return llama::ToolMain(
      argc, argv, "serve_bench", "Measures the serving engine under a stream of requests (no HTTP).",
      [](const std::vector<std::string>&) { return llama::Run(); },
      {"max_seq_len", "max_batch_size", "max_num_batched_tokens", "kv_cache_gb", "kv_block_size",
       "enable_prefix_caching", "device", "kv_cache_dtype", "cuda_graphs", "threads"},
      {llama::BenchModelFlags()});
}
