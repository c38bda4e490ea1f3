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

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include <httplib.h>

#include <atomic>

#include <gflags/gflags.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/ascii.h"
#include "absl/synchronization/mutex.h"
#include "ops/status_macros.h"
#include "tokenizer/prompt_files.h"
#include "tools/bench_model.h"
#include "tools/tool_main.h"
#include "worker/engine/engine.h"
#include "worker/job_flags.h"
#include "worker/model/rank_plan.h"
#include "worker/rank_model.h"

DEFINE_int32(requests, 16, "Requests to send.");
DEFINE_double(request_rate, 0, "Requests per second, Poisson arrivals; 0: all at once.");
DEFINE_int32(max_concurrency, 0, "Most requests in flight from the client's side; 0: no limit.");
DEFINE_int32(prompt_tokens, 128, "Prompt length: uniform in [prompt_tokens / 2, 3 * prompt_tokens / 2].");
DEFINE_int32(shared_prefix_tokens, 0, "Leading prompt tokens that every request shares.");
DEFINE_int32(output_tokens, 64, "Tokens each request generates.");
DEFINE_uint64(bench_seed, 1, "Seeds the prompts and arrival times.");
DEFINE_string(url, "",
              "Load a running server (launcher serve) at this address, e.g. http://127.0.0.1:8000, through its "
              "streamed completions, instead of an engine in this process.");
DEFINE_string(model, "", "With --url: the model's name; default: the server's (GET /v1/models).");
DEFINE_int32(health_probe_ms, 100, "With --url: GET /health this often during the load (0: never); reports p50/p99.");
DEFINE_int32(idle_connections, 0, "With --url: connections held open during the load that never send a byte.");
DEFINE_int32(slow_connections, 0,
             "With --url: connections held open during the load that send one header byte every 3 s (slowloris); "
             "reopened when the server closes them.");
DEFINE_int32(server_pid, 0, "With --url: the server's process (rank 0), whose resident memory is reported.");

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

// "mean M, p50 A, p99 B <unit>" of `values`, with `digits` decimals.
std::string Summary(std::vector<double>& values, int digits, const char* unit) {
  double mean = 0;
  for (double v : values) mean += v / std::max<size_t>(1, values.size());
  return absl::StrFormat("mean %.*f, p50 %.*f, p99 %.*f %s", digits, mean, digits, Quantile(values, 0.5), digits,
                         Quantile(values, 0.99), unit);
}

struct Timing {
  Clock::time_point arrival, first_token, last_token;
  int64_t tokens = 0;
  bool done = false;
  // HTTP: gaps between chunks that carried text, and how it ended.
  std::vector<double> gaps;
  int status = 200;  // An HTTP status, or 0: no answer.
};

// When each request arrives (seconds from the start): all at once, or
// Poisson at --request_rate.
std::vector<double> Arrivals(std::mt19937_64& random) {
  std::vector<double> arrival(FLAGS_requests, 0.0);
  std::exponential_distribution<double> gap(FLAGS_request_rate > 0 ? FLAGS_request_rate : 1.0);
  double at = 0;
  for (double& a : arrival) {
    if (FLAGS_request_rate > 0) at += gap(random);
    a = at;
  }
  return arrival;
}

// A prompt's length: uniform in [prompt_tokens / 2, 3 * prompt_tokens / 2].
int PromptLength(std::mt19937_64& random) {
  return std::max(1, FLAGS_prompt_tokens / 2 + static_cast<int>(random() % (FLAGS_prompt_tokens + 1)));
}

// The load line, throughput and latencies of finished requests.
void ReportLatencies(const std::vector<Timing>& timing, double wall) {
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
  const std::string prompts = FLAGS_prompts_file.empty()
                                  ? absl::StrFormat("~%d prompt", FLAGS_shared_prefix_tokens + FLAGS_prompt_tokens)
                                  : absl::StrCat("prompts of ", FLAGS_prompts_file, ",");
  std::printf("load:         %d requests, %s + %d output tokens each, rate %s, concurrency %s\n", FLAGS_requests,
              prompts.c_str(), FLAGS_output_tokens,
              FLAGS_request_rate > 0 ? absl::StrFormat("%.2f/s", FLAGS_request_rate).c_str() : "all at once",
              FLAGS_max_concurrency > 0 ? absl::StrCat(FLAGS_max_concurrency).c_str() : "unlimited");
  std::printf("throughput:   %.2f output tokens/s, %.3f requests/s, %.1f s in all\n", tokens / wall, ok / wall, wall);
  std::printf("answered:     %d; %d rejected with 429; %d failed\n", ok, rejected, failed);
  std::printf("TTFT:         %s\n", Summary(ttft, 0, "ms").c_str());
  std::printf("TPOT:         %s\n", Summary(tpot, 1, "ms").c_str());
  if (!itl.empty()) std::printf("ITL:          %s (between streamed chunks)\n", Summary(itl, 1, "ms").c_str());
  std::printf("latency:      %s\n", Summary(latency, 2, "s").c_str());
}

absl::Status Run() {
  const JobFlags flags = JobFlagsFromCommandLine();
  RETURN_IF_ERROR(CheckJobFlags(flags, /*need_input=*/false));
  if (!flags.prompts_file.empty()) {
    return absl::InvalidArgumentError("--prompts_file goes with --url (this process's engine takes token ids)");
  }
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
  RendezvousOptions alone;
  alone.world_size = 1;
  ASSIGN_OR_RETURN(RankPeers peers, JoinPeers(alone, 0));
  ASSIGN_OR_RETURN(const RankPlan plan, PlanRankModel(flags, weights, device, peers, /*local_world_size=*/1));
  ASSIGN_OR_RETURN(RankModel made, CreateRankModel(device, peers, std::move(weights), plan,
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
  for (int i = 0; i < FLAGS_requests; ++i) {
    prompts[i] = shared;
    for (int k = PromptLength(random); k > 0; --k) prompts[i].push_back(token());
  }
  const std::vector<double> arrival = Arrivals(random);

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
              static_cast<long long>(s.kv_blocks_total), static_cast<long long>(made.model->limits().kv_block_size),
              static_cast<long long>(s.kv_blocks_total * made.model->limits().kv_block_size), flags.max_batch_size,
              static_cast<long long>(plan.limits.max_step_tokens), flags.enable_prefix_caching ? "on" : "off");
  ReportLatencies(timing, wall);
  std::printf("at once:      %d requests running, %lld of %lld KV blocks in use; %lld preemptions\n", most_running,
              static_cast<long long>(most_blocks), static_cast<long long>(s.kv_blocks_total),
              static_cast<long long>(s.preemptions));
  std::printf("prefix cache: %.1f%% of prompt tokens reused (%lld of %lld)\n",
              s.prompt_tokens > 0 ? 100.0 * s.prefix_hit_tokens / s.prompt_tokens : 0.0,
              static_cast<long long>(s.prefix_hit_tokens), static_cast<long long>(s.prompt_tokens));
  return absl::OkStatus();
}

// A connection to host:port that sends nothing, or a byte now and then; -1
// if refused.
int OpenConnection(const std::string& host, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  if (::inet_pton(AF_INET, host == "localhost" ? "127.0.0.1" : host.c_str(), &address.sin_addr) != 1 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// A process's resident memory now and at its peak (kB), from /proc.
std::pair<int64_t, int64_t> ResidentKb(int pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  int64_t rss = 0, peak = 0;
  for (std::string line; std::getline(status, line);) {
    if (absl::StartsWith(line, "VmRSS:")) absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(6, line.size() - 9)), &rss);
    if (absl::StartsWith(line, "VmHWM:")) absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(6, line.size() - 9)), &peak);
  }
  return {rss, peak};
}

// What the server holds beside the load: idle and slow-header connections
// (reopened when it closes them, as an attacker would), and a /health probe
// whose latencies are the point of it all.
class Bystanders {
 public:
  Bystanders(std::string host, int port) : host_(std::move(host)), port_(port) {}

  void Start() {
    for (int i = 0; i < FLAGS_idle_connections; ++i) idle_.push_back(OpenConnection(host_, port_));
    for (int i = 0; i < FLAGS_slow_connections; ++i) slow_.push_back(Slow{OpenConnection(host_, port_), 0});
    threads_.emplace_back([this] { HoldConnections(); });
    // The load starts once the server has taken them in.
    if (!idle_.empty() || !slow_.empty()) std::this_thread::sleep_for(std::chrono::seconds(1));
    if (FLAGS_health_probe_ms > 0) threads_.emplace_back([this] { Probe(); });
  }
  void Stop() {
    stop_ = true;
    for (std::thread& t : threads_) t.join();
    for (int fd : idle_) ::close(fd);
    for (const Slow& s : slow_) ::close(s.fd);
  }
  void Report() {
    if (FLAGS_health_probe_ms > 0) {
      std::printf("/health:      %zu probes every %d ms, %d failed; %s\n", health_ms_.size(), FLAGS_health_probe_ms,
                  health_failed_, Summary(health_ms_, 2, "ms").c_str());
      std::sort(health_ms_.begin(), health_ms_.end());
      if (!health_ms_.empty()) std::printf("              max %.2f ms\n", health_ms_.back());
    }
    if (FLAGS_idle_connections + FLAGS_slow_connections > 0) {
      std::printf("bystanders:   %d idle and %d slow-header connections held; %d reopened after the server closed them, "
                  "%d refused\n",
                  FLAGS_idle_connections, FLAGS_slow_connections, reopened_, refused_);
    }
  }

 private:
  struct Slow {
    int fd;
    size_t sent;
  };
  // A closed (or refused) connection is opened again.
  void Reopen(int& fd) {
    if (fd >= 0) ::close(fd);
    fd = OpenConnection(host_, port_);
    ++reopened_;
    if (fd < 0) ++refused_;
  }
  // Readable: closed, or answered (a 408), which ends it as well.
  static bool ClosedByServer(int fd) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;
  }
  void HoldConnections() {
    static constexpr char kSlowRequest[] =
        "POST /v1/completions HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nX-Slow: ";
    auto next_byte = Clock::now();
    while (!stop_) {
      for (int& fd : idle_) {
        if (fd < 0 || ClosedByServer(fd)) Reopen(fd);
      }
      if (Clock::now() >= next_byte) {
        for (Slow& s : slow_) {
          if (s.fd < 0 || ClosedByServer(s.fd)) {
            Reopen(s.fd);
            s.sent = 0;
          }
          const char byte = s.sent < sizeof kSlowRequest - 1 ? kSlowRequest[s.sent] : 'a';
          if (s.fd >= 0 && ::send(s.fd, &byte, 1, MSG_NOSIGNAL) == 1) ++s.sent;
        }
        next_byte = Clock::now() + std::chrono::seconds(3);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  void Probe() {
    while (!stop_) {
      const Clock::time_point start = Clock::now();
      httplib::Client client(host_, port_);
      client.set_connection_timeout(10, 0);
      client.set_read_timeout(10, 0);
      httplib::Result r = client.Get("/health");
      const double ms = 1e3 * Seconds(Clock::now() - start);
      if (!r || r->status != 200) {
        ++health_failed_;
      } else {
        health_ms_.push_back(ms);
      }
      std::this_thread::sleep_until(start + std::chrono::milliseconds(FLAGS_health_probe_ms));
    }
  }

  const std::string host_;
  const int port_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
  std::vector<int> idle_;
  std::vector<Slow> slow_;
  int reopened_ = 0, refused_ = 0;  // HoldConnections' own.
  std::vector<double> health_ms_;   // Probe's own; read after Stop.
  int health_failed_ = 0;
};

// Streams one completion from the server, timing its chunks.
void SendRequest(const std::string& host, int port, const std::string& body, Timing& t) {
  httplib::Client client(host, port);
  client.set_read_timeout(600, 0);
  httplib::Request request;
  request.method = "POST";
  request.path = "/v1/completions";
  request.set_header("Content-Type", "application/json");
  request.body = body;
  std::string pending;
  request.content_receiver = [&](const char* data, size_t length, uint64_t, uint64_t) {
    pending.append(data, length);
    for (size_t end; (end = pending.find("\n\n")) != std::string::npos; pending.erase(0, end + 2)) {
      const std::string event = pending.substr(0, end);
      if (!absl::StartsWith(event, "data: {")) continue;
      const nlohmann::json chunk = nlohmann::json::parse(event.substr(6), nullptr, false);
      if (chunk.is_discarded()) continue;
      if (chunk.contains("usage") && chunk["usage"].is_object()) t.tokens = chunk["usage"]["completion_tokens"];
      if (!chunk.contains("choices") || chunk["choices"].empty()) continue;
      if (chunk["choices"][0].value("text", "").empty()) continue;
      const Clock::time_point now = Clock::now();
      if (t.first_token == Clock::time_point()) {
        t.first_token = now;
      } else {
        t.gaps.push_back(Seconds(now - t.last_token));
      }
      t.last_token = now;
    }
    return true;
  };
  httplib::Response response;
  httplib::Error error;
  t.status = client.send(request, response, error) ? response.status : 0;
}

absl::Status RunHttp() {
  absl::string_view address = FLAGS_url;
  if (!absl::ConsumePrefix(&address, "http://")) {
    return absl::InvalidArgumentError(absl::StrFormat("--url=%s: expected http://host:port", FLAGS_url));
  }
  address = address.substr(0, address.find('/'));
  const std::vector<std::string> parts = absl::StrSplit(address, ':');
  int port = 80;
  if (parts.size() > 2 || (parts.size() == 2 && !absl::SimpleAtoi(parts[1], &port))) {
    return absl::InvalidArgumentError(absl::StrFormat("--url=%s: expected http://host:port", FLAGS_url));
  }
  const std::string host = parts[0];
  std::string model = FLAGS_model;
  if (model.empty()) {
    httplib::Client probe(host, port);
    httplib::Result models = probe.Get("/v1/models");
    if (!models || models->status != 200) {
      return absl::UnavailableError(absl::StrFormat("%s/v1/models did not answer: is the server up?", FLAGS_url));
    }
    model = nlohmann::json::parse(models->body)["data"][0]["id"];
  }
  // Prompts of words, as many as make the asked token counts with the
  // server's tokenizer (measured once: a probe's usage.prompt_tokens).
  static constexpr const char* kWords[] = {"the", "river", "quiet", "light", "stone", "morning", "city", "green",
                                           "window", "paper", "under", "bright", "music", "table", "winter", "road"};
  std::mt19937_64 random(FLAGS_bench_seed);
  const auto words = [&](int n) {
    std::string text;
    for (int i = 0; i < n; ++i) absl::StrAppend(&text, i == 0 ? "" : " ", kWords[random() % 16]);
    return text;
  };
  double tokens_per_word = 1;
  {
    httplib::Client probe(host, port);
    httplib::Result r = probe.Post(
        "/v1/completions",
        nlohmann::json{{"model", model}, {"prompt", words(64)}, {"max_tokens", 0}}.dump(), "application/json");
    if (!r || r->status != 200) {
      return absl::UnavailableError(absl::StrFormat("%s/v1/completions did not answer a probe: %s", FLAGS_url,
                                                    r ? r->body : httplib::to_string(r.error())));
    }
    tokens_per_word = nlohmann::json::parse(r->body)["usage"]["prompt_tokens"].get<double>() / 64;
  }
  const auto words_for = [&](int tokens) { return std::max(1, static_cast<int>(tokens / tokens_per_word + 0.5)); };
  const std::string shared = FLAGS_shared_prefix_tokens > 0 ? words(words_for(FLAGS_shared_prefix_tokens)) : "";
  std::vector<std::string> given;
  if (!FLAGS_prompts_file.empty()) {
    ASSIGN_OR_RETURN(given, ReadPromptsFile(FLAGS_prompts_file));
    if (given.empty()) return absl::InvalidArgumentError(absl::StrFormat("%s holds no prompt", FLAGS_prompts_file));
  }
  std::vector<std::string> bodies;
  for (int i = 0; i < FLAGS_requests; ++i) {
    const std::string prompt = !given.empty() ? given[i % given.size()]
                                              : absl::StrCat(shared, shared.empty() ? "" : " ",
                                                             words(words_for(PromptLength(random))));
    bodies.push_back(nlohmann::json{{"model", model},
                                    {"prompt", prompt},
                                    {"max_tokens", FLAGS_output_tokens},
                                    {"temperature", 0},
                                    {"ignore_eos", true},
                                    {"stream", true},
                                    {"stream_options", {{"include_usage", true}}}}
                         .dump());
  }
  const std::vector<double> arrival = Arrivals(random);
  std::vector<Timing> timing(FLAGS_requests);
  std::atomic<int> in_flight{0};
  std::vector<std::thread> clients;
  // Thousands of connections need as many descriptors.
  if (rlimit files{}; getrlimit(RLIMIT_NOFILE, &files) == 0) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
  const std::pair<int64_t, int64_t> rss_before = FLAGS_server_pid > 0 ? ResidentKb(FLAGS_server_pid)
                                                                      : std::pair<int64_t, int64_t>{0, 0};
  Bystanders bystanders(host, port);
  bystanders.Start();
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < FLAGS_requests; ++i) {
    while (Seconds(Clock::now() - start) < arrival[i] ||
           (FLAGS_max_concurrency > 0 && in_flight >= FLAGS_max_concurrency)) {
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    ++in_flight;
    timing[i].arrival = Clock::now();
    clients.emplace_back([&, i] {
      SendRequest(host, port, bodies[i], timing[i]);
      --in_flight;
    });
  }
  for (std::thread& c : clients) c.join();
  const double wall = Seconds(Clock::now() - start);
  bystanders.Stop();
  std::printf("server:       %s, model %s (streamed completions)\n", FLAGS_url.c_str(), model.c_str());
  ReportLatencies(timing, wall);
  bystanders.Report();
  if (FLAGS_server_pid > 0) {
    const auto [rss, peak] = ResidentKb(FLAGS_server_pid);
    std::printf("server RSS:   %.1f MB before, %.1f MB after, peak %.1f MB (pid %d)\n", rss_before.first / 1024.0,
                rss / 1024.0, peak / 1024.0, FLAGS_server_pid);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace llama

int main(int argc, char** argv) {
  return llama::ToolMain(
      argc, argv, "serve_bench",
      "Measures the serving engine under a stream of requests: in this process, or a server over HTTP (--url).",
      [](const std::vector<std::string>&) { return FLAGS_url.empty() ? llama::Run() : llama::RunHttp(); },
      {"prompts_file", "max_seq_len", "max_batch_size", "max_num_batched_tokens", "kv_cache_gb", "kv_block_size",
       "enable_prefix_caching", "device", "kv_cache_dtype", "cuda_graphs", "int8_prefill", "bf16_activations", "threads"},
      {llama::BenchModelFlags()});
}
