#include "tools/serve_bench_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"
#include "worker/prompt_files.h"

namespace llama {
namespace {

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
  Bystanders(std::string host, int port, const HttpLoadOptions& options)
      : host_(std::move(host)), port_(port), options_(options) {}

  void Start() {
    for (int i = 0; i < options_.idle_connections; ++i) idle_.push_back(OpenConnection(host_, port_));
    for (int i = 0; i < options_.slow_connections; ++i) slow_.push_back(Slow{OpenConnection(host_, port_), 0});
    threads_.emplace_back([this] { HoldConnections(); });
    // The load starts once the server has taken them in.
    if (!idle_.empty() || !slow_.empty()) std::this_thread::sleep_for(std::chrono::seconds(1));
    if (options_.health_probe_ms > 0) threads_.emplace_back([this] { Probe(); });
  }
  void Stop() {
    stop_ = true;
    for (std::thread& t : threads_) t.join();
    for (int fd : idle_) ::close(fd);
    for (const Slow& s : slow_) ::close(s.fd);
  }
  void Report() {
    if (options_.health_probe_ms > 0) {
      std::printf("/health:      %zu probes every %d ms, %d failed; %s\n", health_ms_.size(), options_.health_probe_ms,
                  health_failed_, Summary(health_ms_, 2, "ms").c_str());
      std::sort(health_ms_.begin(), health_ms_.end());
      if (!health_ms_.empty()) std::printf("              max %.2f ms\n", health_ms_.back());
    }
    if (options_.idle_connections + options_.slow_connections > 0) {
      std::printf("bystanders:   %d idle and %d slow-header connections held; %d reopened after the server closed them, "
                  "%d refused\n",
                  options_.idle_connections, options_.slow_connections, reopened_, refused_);
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
      std::this_thread::sleep_until(start + std::chrono::milliseconds(options_.health_probe_ms));
    }
  }

  const std::string host_;
  const int port_;
  const HttpLoadOptions options_;
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

// The server's address in --url.
absl::Status ParseUrl(const std::string& url, std::string* host, int* port) {
  absl::string_view address = url;
  if (!absl::ConsumePrefix(&address, "http://")) {
    return absl::InvalidArgumentError(absl::StrFormat("--url=%s: expected http://host:port", url));
  }
  address = address.substr(0, address.find('/'));
  const std::vector<std::string> parts = absl::StrSplit(address, ':');
  *port = 80;
  if (parts.size() > 2 || (parts.size() == 2 && !absl::SimpleAtoi(parts[1], port))) {
    return absl::InvalidArgumentError(absl::StrFormat("--url=%s: expected http://host:port", url));
  }
  *host = parts[0];
  return absl::OkStatus();
}

// The model to ask for: the one given, or the server's first.
absl::StatusOr<std::string> ServedModel(const std::string& host, int port, const HttpLoadOptions& options) {
  if (!options.model.empty()) return options.model;
  httplib::Client probe(host, port);
  httplib::Result models = probe.Get("/v1/models");
  if (!models || models->status != 200) {
    return absl::UnavailableError(absl::StrFormat("%s/v1/models did not answer: is the server up?", options.url));
  }
  return nlohmann::json::parse(models->body)["data"][0]["id"].get<std::string>();
}

// Prompts of words, as many as make the asked token counts with the
// server's tokenizer (measured once: a probe's usage.prompt_tokens), or
// those of the prompts file; one streamed completion's body each.
absl::StatusOr<std::vector<std::string>> RequestBodies(const LoadShape& load, const std::string& host, int port,
                                                       const std::string& url, const std::string& model,
                                                       std::mt19937_64& random) {
  static constexpr const char* kWords[] = {"the", "river", "quiet", "light", "stone", "morning", "city", "green",
                                           "window", "paper", "under", "bright", "music", "table", "winter", "road"};
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
      return absl::UnavailableError(absl::StrFormat("%s/v1/completions did not answer a probe: %s", url,
                                                    r ? r->body : httplib::to_string(r.error())));
    }
    tokens_per_word = nlohmann::json::parse(r->body)["usage"]["prompt_tokens"].get<double>() / 64;
  }
  const auto words_for = [&](int tokens) { return std::max(1, static_cast<int>(tokens / tokens_per_word + 0.5)); };
  const std::string shared = load.shared_prefix_tokens > 0 ? words(words_for(load.shared_prefix_tokens)) : "";
  std::vector<std::string> given;
  if (!load.prompts_file.empty()) {
    ASSIGN_OR_RETURN(given, ReadPromptsFile(load.prompts_file));
    if (given.empty()) return absl::InvalidArgumentError(absl::StrFormat("%s holds no prompt", load.prompts_file));
  }
  std::vector<std::string> bodies;
  for (int i = 0; i < load.requests; ++i) {
    const std::string prompt = !given.empty() ? given[i % given.size()]
                                              : absl::StrCat(shared, shared.empty() ? "" : " ",
                                                             words(words_for(PromptLength(load, random))));
    bodies.push_back(nlohmann::json{{"model", model},
                                    {"prompt", prompt},
                                    {"max_tokens", load.output_tokens},
                                    {"temperature", 0},
                                    {"ignore_eos", true},
                                    {"stream", true},
                                    {"stream_options", {{"include_usage", true}}}}
                         .dump());
  }
  return bodies;
}

// Sends bodies[i] at arrival[i] (seconds from the start), at most
// max_concurrency at once, each on a thread and connection of its own;
// returns the seconds it took.
double SendLoad(const LoadShape& load, const std::string& host, int port, const std::vector<std::string>& bodies,
                const std::vector<double>& arrival, std::vector<Timing>& timing) {
  std::atomic<int> in_flight{0};
  std::vector<std::thread> clients;
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < load.requests; ++i) {
    while (Seconds(Clock::now() - start) < arrival[i] ||
           (load.max_concurrency > 0 && in_flight >= load.max_concurrency)) {
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
  return Seconds(Clock::now() - start);
}

}  // namespace

absl::Status RunHttpLoad(const LoadShape& load, const HttpLoadOptions& options) {
  std::string host;
  int port = 80;
  RETURN_IF_ERROR(ParseUrl(options.url, &host, &port));
  ASSIGN_OR_RETURN(const std::string model, ServedModel(host, port, options));
  std::mt19937_64 random(load.bench_seed);
  ASSIGN_OR_RETURN(const std::vector<std::string> bodies, RequestBodies(load, host, port, options.url, model, random));
  const std::vector<double> arrival = Arrivals(load, random);
  std::vector<Timing> timing(load.requests);
  // Thousands of connections need as many descriptors.
  if (rlimit files{}; getrlimit(RLIMIT_NOFILE, &files) == 0) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
  const std::pair<int64_t, int64_t> rss_before = options.server_pid > 0 ? ResidentKb(options.server_pid)
                                                                        : std::pair<int64_t, int64_t>{0, 0};
  Bystanders bystanders(host, port, options);
  bystanders.Start();
  const double wall = SendLoad(load, host, port, bodies, arrival, timing);
  bystanders.Stop();
  std::printf("server:       %s, model %s (streamed completions)\n", options.url.c_str(), model.c_str());
  ReportLatencies(load, timing, wall);
  bystanders.Report();
  if (options.server_pid > 0) {
    const auto [rss, peak] = ResidentKb(options.server_pid);
    std::printf("server RSS:   %.1f MB before, %.1f MB after, peak %.1f MB (pid %d)\n", rss_before.first / 1024.0,
                rss / 1024.0, peak / 1024.0, options.server_pid);
  }
  return absl::OkStatus();
}

}  // namespace llama
