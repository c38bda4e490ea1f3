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
//   serve_bench --url=http://127.0.0.1:8000 [--prompts_file=prompts.json]
//                                                      a running server
//   serve_bench --url=... --max_concurrency=1024 --requests=1024 --idle_connections=1000
//               --slow_connections=64 --server_pid=$(pgrep -n worker)
//                                                      ... with bystanders: /health is probed
//                                                      every --health_probe_ms throughout
//
// One rank, on the model of //tools:bench (synthetic TinyLlama-shaped by
// default, or --shard), built as the worker builds it.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include <gflags/gflags.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "tools/bench_model.h"
#include "tools/serve_bench_http.h"
#include "tools/serve_load.h"
#include "tools/tool_main.h"
#include "worker/engine/engine.h"
#include "worker/engine_flags.h"
#include "worker/job_flags.h"
#include "worker/model/rank_plan.h"
#include "worker/rank_model.h"

// serve_bench's flags, each written once (type, name, default, help): the
// load's are the fields of the same name in LoadShape, the HTTP mode's in
// HttpLoadOptions, and both are copied from here.
#define SERVE_BENCH_LOAD_FLAGS(X)                                                                           \
  X(int32, requests, 16, "Requests to send.")                                                               \
  X(double, request_rate, 0, "Requests per second, Poisson arrivals; 0: all at once.")                      \
  X(int32, max_concurrency, 0, "Most requests in flight from the client's side; 0: no limit.")              \
  X(int32, prompt_tokens, 128, "Prompt length: uniform in [prompt_tokens / 2, 3 * prompt_tokens / 2].")     \
  X(int32, shared_prefix_tokens, 0, "Leading prompt tokens that every request shares.")                     \
  X(int32, output_tokens, 64, "Tokens each request generates.")                                             \
  X(uint64, bench_seed, 1, "Seeds the prompts and arrival times.")
#define SERVE_BENCH_HTTP_FLAGS(X)                                                                           \
  X(string, url, "",                                                                                        \
    "Load a running server (launcher serve) at this address, e.g. http://127.0.0.1:8000, through its "      \
    "streamed completions, instead of an engine in this process.")                                          \
  X(string, model, "", "With --url: the model's name; default: the server's (GET /v1/models).")             \
  X(int32, health_probe_ms, 100,                                                                            \
    "With --url: GET /health this often during the load (0: never); reports p50/p99.")                      \
  X(int32, idle_connections, 0,                                                                             \
    "With --url: connections held open during the load that never send a byte.")                            \
  X(int32, slow_connections, 0,                                                                             \
    "With --url: connections held open during the load that send one header byte every 3 s (slowloris); "   \
    "reopened when the server closes them.")                                                                \
  X(int32, server_pid, 0, "With --url: the server's process (rank 0), whose resident memory is reported.")

#define SERVE_BENCH_DEFINE_FLAG(type, name, default_value, help) DEFINE_##type(name, default_value, help);
SERVE_BENCH_LOAD_FLAGS(SERVE_BENCH_DEFINE_FLAG)
SERVE_BENCH_HTTP_FLAGS(SERVE_BENCH_DEFINE_FLAG)
#undef SERVE_BENCH_DEFINE_FLAG

namespace llama {
namespace {

#define SERVE_BENCH_COPY_FLAG(type, name, default_value, help) to.name = FLAGS_##name;

LoadShape LoadFromFlags() {
  LoadShape to;
  SERVE_BENCH_LOAD_FLAGS(SERVE_BENCH_COPY_FLAG)
  to.prompts_file = FLAGS_prompts_file;  // A job flag (worker/job_flags.h).
  return to;
}

HttpLoadOptions HttpLoadFromFlags() {
  HttpLoadOptions to;
  SERVE_BENCH_HTTP_FLAGS(SERVE_BENCH_COPY_FLAG)
  return to;
}

#undef SERVE_BENCH_COPY_FLAG

// The load's flags, and that its longest request fits in the context.
absl::Status CheckLoad(const JobFlags& flags, const LoadShape& load) {
  if (!flags.prompts_file.empty()) {
    return absl::InvalidArgumentError("--prompts_file goes with --url (this process's engine takes token ids)");
  }
  if (!flags.draft_shard_dir.empty()) {
    return absl::InvalidArgumentError(
        "--draft_shard_dir goes with --url (a server started with it); this process's engine guesses by "
        "--speculative_ngram only");
  }
  for (const auto& [name, value] : {std::pair<const char*, int>{"requests", load.requests},
                                    {"prompt_tokens", load.prompt_tokens},
                                    {"output_tokens", load.output_tokens}}) {
    if (value < 1) return absl::InvalidArgumentError(absl::StrFormat("--%s=%d: expected at least 1", name, value));
  }
  if (load.shared_prefix_tokens < 0 || load.max_concurrency < 0 || !(load.request_rate >= 0)) {
    return absl::InvalidArgumentError("--shared_prefix_tokens, --max_concurrency and --request_rate must be >= 0");
  }
  const int64_t longest = load.shared_prefix_tokens + 3 * load.prompt_tokens / 2 + load.output_tokens;
  if (flags.max_seq_len > 0 && longest > flags.max_seq_len) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a request may take %d positions (shared prefix + 1.5 x --prompt_tokens + --output_tokens) but "
        "--max_seq_len=%d",
        longest, flags.max_seq_len));
  }
  return absl::OkStatus();
}

// Random token prompts (ids 3 and up), the shared prefix first.
std::vector<std::vector<int>> RandomPrompts(const LoadShape& load, int64_t vocab_size, std::mt19937_64& random) {
  const auto token = [&] { return 3 + static_cast<int>(random() % (vocab_size - 3)); };
  std::vector<int> shared(load.shared_prefix_tokens);
  for (int& t : shared) t = token();
  std::vector<std::vector<int>> prompts(load.requests);
  for (int i = 0; i < load.requests; ++i) {
    prompts[i] = shared;
    for (int k = PromptLength(load, random); k > 0; --k) prompts[i].push_back(token());
  }
  return prompts;
}

// What the engine held at its busiest.
struct EnginePeaks {
  int most_running = 0;
  int64_t most_blocks = 0;
};

// Submits prompts[i] at arrival[i] (seconds from the start), at most
// max_concurrency in flight, and steps the engine until all are done;
// returns the seconds it took.
absl::StatusOr<double> DriveEngine(const LoadShape& load, Engine& engine, const std::vector<std::vector<int>>& prompts,
                                   const std::vector<double>& arrival, std::vector<Timing>& timing,
                                   EnginePeaks& peaks) {
  int submitted = 0, finished = 0;
  const Clock::time_point start = Clock::now();
  while (finished < load.requests) {
    const double now = Seconds(Clock::now() - start);
    while (submitted < load.requests && arrival[submitted] <= now &&
           (load.max_concurrency == 0 || submitted - finished < load.max_concurrency)) {
      const int i = submitted++;
      EngineRequest request;
      request.prompt = prompts[i];
      request.max_new_tokens = load.output_tokens;
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
    peaks.most_running = std::max(peaks.most_running, s.running);
    peaks.most_blocks = std::max(peaks.most_blocks, s.kv_blocks_used);
  }
  return Seconds(Clock::now() - start);
}

// What ran: the "model:" and "KV cache:" lines.
void ReportSetup(const JobFlags& flags, Device device, const RankPlan& plan, DType weight_dtype,
                 const EngineStats& s) {
  const ModelConfig& config = plan.config();
  const int64_t kv_block_size = plan.limits.kv_block_size;
  std::printf("model:        dim %lld, %lld layers, vocab %lld, %s; %s\n", static_cast<long long>(config.dim),
              static_cast<long long>(config.n_layers), static_cast<long long>(config.vocab_size),
              FLAGS_shard.empty() ? absl::StrCat("synthetic ", DTypeName(weight_dtype)).c_str() : FLAGS_shard.c_str(),
              device == Device::kCuda
                  ? "cuda"
                  : absl::StrFormat("cpu, %d thread(s)", plan.threads).c_str());
  std::printf("KV cache:     %lld blocks of %lld positions (%lld positions), --max_batch_size=%d, "
              "--max_num_batched_tokens=%lld, prefix caching %s\n",
              static_cast<long long>(s.kv_blocks_total), static_cast<long long>(kv_block_size),
              static_cast<long long>(s.kv_blocks_total * kv_block_size), flags.max_batch_size,
              static_cast<long long>(plan.limits.max_step_tokens), flags.enable_prefix_caching ? "on" : "off");
}

// The "at once:", "prefix cache:" and (with guesses) "speculation:" lines.
void ReportPeaks(const EngineStats& s, const EnginePeaks& peaks) {
  std::printf("at once:      %d requests running, %lld of %lld KV blocks in use; %lld preemptions\n",
              peaks.most_running, static_cast<long long>(peaks.most_blocks),
              static_cast<long long>(s.kv_blocks_total), static_cast<long long>(s.preemptions));
  std::printf("prefix cache: %.1f%% of prompt tokens reused (%lld of %lld)\n",
              s.prompt_tokens > 0 ? 100.0 * s.prefix_hit_tokens / s.prompt_tokens : 0.0,
              static_cast<long long>(s.prefix_hit_tokens), static_cast<long long>(s.prompt_tokens));
  if (const std::string speculation = s.DescribeSpeculation(); !speculation.empty()) {
    std::printf("speculation:  %s\n", speculation.c_str());
  }
}

// The load on an engine in this process, one rank, built as the worker builds it.
absl::Status Run() {
  const JobFlags flags = JobFlagsFromCommandLine();
  RETURN_IF_ERROR(CheckJobFlags(flags, /*need_input=*/false));
  const LoadShape load = LoadFromFlags();
  RETURN_IF_ERROR(CheckLoad(flags, load));

  ASSIGN_OR_RETURN(const Device device, ChooseRankDevice(flags.device));
  ASSIGN_OR_RETURN(ModelWeights weights, BenchModelWeights(0, 1));
  const ModelConfig config = weights.config;
  const DType weight_dtype = weights.layers[0].wq.dtype();
  RendezvousOptions alone;
  alone.world_size = 1;
  ASSIGN_OR_RETURN(RankPeers peers, JoinPeers(alone, 0));
  ASSIGN_OR_RETURN(const RankPlan plan, PlanRankModel(flags, weights, device, peers, /*local_world_size=*/1));
  ASSIGN_OR_RETURN(RankModel made, CreateRankModel(device, peers, std::move(weights), plan,
                                                   std::chrono::seconds(flags.collective_timeout)));
  Engine engine(made.model.get(), EngineOptionsFromFlags(flags));

  std::mt19937_64 random(load.bench_seed);
  const std::vector<std::vector<int>> prompts = RandomPrompts(load, config.vocab_size, random);
  const std::vector<double> arrival = Arrivals(load, random);
  std::vector<Timing> timing(load.requests);
  EnginePeaks peaks;
  ASSIGN_OR_RETURN(const double wall, DriveEngine(load, engine, prompts, arrival, timing, peaks));
  const EngineStats s = engine.stats();
  ReportSetup(flags, device, plan, weight_dtype, s);
  ReportLatencies(load, timing, wall);
  ReportPeaks(s, peaks);
  return absl::OkStatus();
}


}  // namespace
}  // namespace llama

int main(int argc, char** argv) {
  return llama::ToolMain(
      argc, argv, "serve_bench",
      "Measures the serving engine under a stream of requests: in this process, or a server over HTTP (--url).",
      [](const std::vector<std::string>&) {
        return FLAGS_url.empty() ? llama::Run()
                                 : llama::RunHttpLoad(llama::LoadFromFlags(), llama::HttpLoadFromFlags());
      },
      [] {
        std::vector<std::string> shared = {"prompts_file", "max_seq_len", "max_batch_size", "max_num_batched_tokens",
                                           "kv_cache_gb", "kv_block_size", "enable_prefix_caching",
                                           "speculative_ngram", "num_speculative_tokens", "speculation_priced"};
        for (std::string& name : llama::JobFlagNames(llama::JobFlagGroup::kRankModel)) shared.push_back(name);
        return shared;
      }(),
      {llama::BenchModelFlags()});
}
