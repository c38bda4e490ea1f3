#include "launcher/serve_front_end.h"

#include <map>
#include <optional>
#include <utility>

#include <glog/logging.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "worker/engine/kv_block_pool.h"
#include "worker/serve/api_keys.h"
#include "worker/serve/api_response.h"

namespace llama {

namespace {

using nlohmann::json;

// The error a replica's own server gives when its engine fails mid-answer
// (worker/serve/api_call.cc), so that clients see one kind of failure.
ApiError ReplicaFailed(int replica, const std::string& why) {
  return {503, absl::StrFormat("replica %d failed during the answer: its connection broke (%s)", replica, why),
          "server_error", "", "engine_failed"};
}

// Headers passed from the client to the replica, and back.
constexpr absl::string_view kRequestHeaders[] = {"Authorization", "Content-Type", "Accept"};
constexpr absl::string_view kAnswerHeaders[] = {"Retry-After", "WWW-Authenticate"};

}  // namespace

PromptForRouting RoutingPrompt(const std::string& path, const std::string& body) {
  PromptForRouting prompt;
  const json request = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!request.is_object() || !request.contains("model")) return prompt;
  if (path == "/v1/completions" && request.contains("prompt")) {
    json first = request["prompt"];
    // An array of prompts, or of token-id arrays: the first one.
    if (first.is_array() && !first.empty() && (first[0].is_string() || first[0].is_array())) first = first[0];
    if (first.is_string()) {
      prompt.tokenize_body = json{{"model", request["model"]}, {"prompt", first}}.dump();
    } else if (first.is_array()) {
      for (const json& id : first) {
        if (!id.is_number_integer()) return {};
        prompt.tokens.push_back(id.get<int>());
      }
    }
  } else if (path == "/v1/chat/completions" && request.contains("messages")) {
    json call = {{"model", request["model"]}, {"messages", request["messages"]}};
    if (request.contains("tools")) call["tools"] = request["tools"];
    prompt.tokenize_body = call.dump();
  }
  return prompt;
}

namespace {

struct Sample {
  std::string name, labels;  // labels: what was inside {}, or "".
  double value = 0;
  std::string text;  // The value as written.
};

struct Family {
  std::string help, type;
  std::vector<std::string> keys;           // Summed samples, in first-seen order.
  std::map<std::string, Sample> sums;      // By name{labels}.
  std::vector<std::vector<Sample>> by_replica;
};

std::optional<Sample> ParseSample(absl::string_view line) {
  const size_t space = line.rfind(' ');
  if (space == absl::string_view::npos) return std::nullopt;
  Sample sample;
  sample.text = std::string(line.substr(space + 1));
  if (!absl::SimpleAtod(sample.text, &sample.value)) return std::nullopt;
  const absl::string_view series = absl::StripAsciiWhitespace(line.substr(0, space));
  const size_t brace = series.find('{');
  sample.name = std::string(series.substr(0, brace));
  if (brace != absl::string_view::npos) {
    if (!absl::EndsWith(series, "}")) return std::nullopt;
    sample.labels = std::string(series.substr(brace + 1, series.size() - brace - 2));
  }
  return sample;
}

std::string FormatSample(const Sample& sample, const std::string& extra_label) {
  std::string labels = extra_label;
  if (!sample.labels.empty()) absl::StrAppend(&labels, labels.empty() ? "" : ",", sample.labels);
  return absl::StrCat(sample.name, labels.empty() ? "" : absl::StrCat("{", labels, "}"), " ", sample.text, "\n");
}

}  // namespace

std::string MergeReplicaMetrics(const std::vector<std::string>& replicas) {
  std::vector<std::string> order;
  std::map<std::string, Family> families;
  const auto family = [&](const std::string& name) -> Family& {
    auto [it, added] = families.try_emplace(name);
    if (added) {
      order.push_back(name);
      it->second.by_replica.resize(replicas.size());
    }
    return it->second;
  };
  for (size_t r = 0; r < replicas.size(); ++r) {
    std::string current;
    for (absl::string_view line : absl::StrSplit(replicas[r], '\n', absl::SkipWhitespace())) {
      if (absl::StartsWith(line, "# HELP ") || absl::StartsWith(line, "# TYPE ")) {
        const std::vector<absl::string_view> words = absl::StrSplit(line, absl::MaxSplits(' ', 3));
        if (words.size() < 3) continue;
        current = std::string(words[2]);
        Family& f = family(current);
        std::string& field = words[1] == "HELP" ? f.help : f.type;
        if (field.empty()) field = std::string(line);
        continue;
      }
      if (absl::StartsWith(line, "#")) continue;
      std::optional<Sample> sample = ParseSample(line);
      if (!sample.has_value()) continue;
      Family& f = family(current.empty() ? sample->name : current);
      f.by_replica[r].push_back(*sample);
      if (absl::StrContains(sample->labels, "quantile=")) continue;
      const std::string key = absl::StrCat(sample->name, "{", sample->labels, "}");
      auto [sum, added] = f.sums.try_emplace(key, *sample);
      if (added) {
        f.keys.push_back(key);
      } else {
        sum->second.value += sample->value;
      }
      sum->second.text = absl::StrFormat("%.17g", sum->second.value);
    }
  }
  std::string text;
  for (const std::string& name : order) {
    const Family& f = families[name];
    if (!f.help.empty()) absl::StrAppend(&text, f.help, "\n");
    if (!f.type.empty()) absl::StrAppend(&text, f.type, "\n");
    for (const std::string& key : f.keys) text += FormatSample(f.sums.at(key), "");
    for (size_t r = 0; r < f.by_replica.size(); ++r) {
      for (const Sample& sample : f.by_replica[r]) text += FormatSample(sample, absl::StrFormat("replica=\"%d\"", r));
    }
  }
  return text;
}

ServeFrontEnd::ServeFrontEnd(FrontEndOptions options)
    : options_(std::move(options)),
      router_(options_.replicas, options_.routing),
      http_([this] {
        http::ServerOptions o = ApiHttpOptions(options_.host, options_.port, options_.limits, options_.access_log);
        // Each answer holds a thread while it is proxied.
        o.worker_threads = options_.max_concurrent_requests;
        return o;
      }()),
      endpoints_(options_.replicas),
      event_cursors_(options_.replicas, 0),
      event_epochs_(options_.replicas),
      generations_(options_.replicas, 0) {}

ServeFrontEnd::~ServeFrontEnd() { Stop(); }

absl::Status ServeFrontEnd::Start() {
  const auto proxy = [this](std::shared_ptr<http::Exchange> exchange) { Proxy(exchange); };
  const auto check_key = [this](const http::Request& head) { return RefuseWithoutKey(head, options_.api_keys); };
  http_.Handle({"GET", "/health", nullptr, [this](std::shared_ptr<http::Exchange> e) { Health(e); },
                /*on_io_thread=*/true});
  http_.Handle({"GET", "/metrics", nullptr, [this](std::shared_ptr<http::Exchange> e) { Metrics(e); }});
  http_.Handle({"GET", "/v1/models", check_key, proxy});
  for (const char* path : {"/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize"}) {
    http_.Handle({"POST", path, check_key, proxy});
  }
  if (absl::Status started = http_.Start(); !started.ok()) return started;
  prober_ = std::thread([this] { ProbeLoop(); });
  return absl::OkStatus();
}

void ServeFrontEnd::Stop() {
  if (!stop_probing_.HasBeenNotified()) stop_probing_.Notify();
  if (prober_.joinable()) prober_.join();
  {
    absl::MutexLock lock(&upstream_mutex_);
    for (const auto& client : upstream_) client->stop();
  }
  http_.Stop();
}

void ServeFrontEnd::WaitForAnswers(absl::Duration timeout) const {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    int in_flight = 0;
    for (int r = 0; r < options_.replicas; ++r) in_flight += router_.counts(r).in_flight;
    if (in_flight == 0) return;
    absl::SleepFor(absl::Milliseconds(50));
  }
}

void ServeFrontEnd::ReplicaReady(int replica, const std::string& host, int port) {
  {
    absl::MutexLock lock(&mutex_);
    endpoints_[replica] = {host, port};
    event_cursors_[replica] = 0;
    event_epochs_[replica].clear();
    ++generations_[replica];
  }
  router_.Forget(replica);  // A new start: its cache is empty.
}

void ServeFrontEnd::ReplicaDown(int replica) {
  {
    absl::MutexLock lock(&mutex_);
    endpoints_[replica].port = 0;
    ++generations_[replica];
  }
  if (router_.up(replica) && !draining_) LOG(WARNING) << "replica " << replica << " is down: its ranks have exited";
  router_.SetUp(replica, false);
}

ServeFrontEnd::Endpoint ServeFrontEnd::ReplicaEndpoint(int replica) const {
  absl::MutexLock lock(&mutex_);
  return endpoints_[replica];
}

void ServeFrontEnd::ProbeLoop() {
  do {
    for (int r = 0; r < options_.replicas; ++r) {
      Endpoint endpoint;
      uint64_t generation;
      {
        absl::MutexLock lock(&mutex_);
        endpoint = endpoints_[r];
        generation = generations_[r];
      }
      bool up = false;
      if (endpoint.port > 0) {
        httplib::Client client(endpoint.host, endpoint.port);
        client.set_connection_timeout(0, 500000);
        client.set_read_timeout(2, 0);
        const httplib::Result health = client.Get("/health");
        up = health && health->status == 200;
      }
      {
        // The verdict stands only if the replica did not restart or go
        // down meanwhile (then the next probe decides).
        absl::MutexLock lock(&mutex_);
        if (generations_[r] != generation) continue;
        if (up != router_.up(r)) {
          LOG(INFO) << "replica " << r << (up ? " is up" : " is down: its /health is not ok");
          router_.SetUp(r, up);
        }
        if (up) ever_up_ = true;
      }
      if (up && options_.routing.policy == RoutingPolicy::kPrefix) ReadCacheEvents(r, endpoint.host, endpoint.port);
    }
  } while (!stop_probing_.WaitForNotificationWithTimeout(options_.probe_interval));
}

void ServeFrontEnd::Health(const std::shared_ptr<http::Exchange>& exchange) const {
  const int up = router_.replicas_up(), all = router_.replicas();
  std::string status = up == all ? "ok" : up > 0 ? "degraded" : ever_up_ ? "down" : "loading";
  if (draining_) status = "draining";
  const json body = {{"status", status}, {"replicas_up", up}, {"replicas", all}};
  exchange->Respond(JsonResponse(status == "ok" || status == "degraded" ? 200 : 503, body.dump()));
}

void ServeFrontEnd::Metrics(const std::shared_ptr<http::Exchange>& exchange) const {
  std::vector<std::string> texts;
  for (int r = 0; r < options_.replicas; ++r) {
    std::string text;
    if (const Endpoint endpoint = ReplicaEndpoint(r); endpoint.port > 0) {
      httplib::Client client(endpoint.host, endpoint.port);
      client.set_connection_timeout(1, 0);
      client.set_read_timeout(5, 0);
      if (httplib::Result got = client.Get("/metrics"); got && got->status == 200) text = got->body;
    }
    texts.push_back(std::move(text));
  }
  std::string out = MergeReplicaMetrics(texts);
  absl::StrAppend(&out, "# HELP llama_router_replicas_up Replicas taking requests now.\n",
                  "# TYPE llama_router_replicas_up gauge\n", "llama_router_replicas_up ", router_.replicas_up(), "\n",
                  "# HELP llama_router_requests_total Requests routed to each replica; by=\"prefix\": where a prefix "
                  "of the request was sent before (--routing=prefix).\n",
                  "# TYPE llama_router_requests_total counter\n");
  for (int r = 0; r < options_.replicas; ++r) {
    const ReplicaRouter::Counts counts = router_.counts(r);
    absl::StrAppendFormat(&out, "llama_router_requests_total{replica=\"%d\",by=\"prefix\"} %d\n", r,
                          counts.prefix_routed);
    absl::StrAppendFormat(&out, "llama_router_requests_total{replica=\"%d\",by=\"load\"} %d\n", r,
                          counts.routed - counts.prefix_routed);
  }
  exchange->Respond({200, "text/plain; version=0.0.4", std::move(out), {}});
}

void ServeFrontEnd::ReadCacheEvents(int replica, const std::string& host, int port) {
  httplib::Client client(host, port);
  client.set_connection_timeout(0, 500000);
  client.set_read_timeout(2, 0);
  if (!options_.api_keys.empty()) client.set_bearer_token_auth(options_.api_keys[0]);
  while (true) {
    uint64_t after;
    {
      absl::MutexLock lock(&mutex_);
      after = event_cursors_[replica];
    }
    const httplib::Result got = client.Get(absl::StrCat("/v1/kv_cache_events?after=", after));
    if (!got || got->status != 200) return;  // A server without them: the routed prompts alone count.
    const json batch = json::parse(got->body, nullptr, /*allow_exceptions=*/false);
    if (!batch.is_object() || !batch.contains("events") || !batch["events"].is_array()) return;
    block_size_ = batch.value("block_size", int64_t{0});
    absl::MutexLock lock(&mutex_);
    if (event_cursors_[replica] != after) return;  // A new start meanwhile (ReplicaReady): its own events next.
    const std::string epoch = batch.value("epoch", "");
    if (epoch != event_epochs_[replica]) {
      const bool restarted = !event_epochs_[replica].empty();
      event_epochs_[replica] = epoch;
      if (restarted) {  // Another engine on the same address: start over.
        router_.Forget(replica);
        event_cursors_[replica] = 0;
        continue;
      }
    }
    if (batch.value("reset", false)) router_.Forget(replica);
    for (const json& event : batch["events"]) {
      uint64_t hash;
      if (!absl::SimpleHexAtoi(event.value("hash", ""), &hash)) continue;
      if (event.value("stored", false)) {
        router_.Stored(replica, hash);
      } else {
        router_.Removed(replica, hash);
      }
    }
    event_cursors_[replica] = batch.value("next", after);
    if (batch["events"].size() < 4096) return;
  }
}

std::vector<uint64_t> ServeFrontEnd::PromptBlocks(const http::Request& request, int64_t* tokens) {
  *tokens = static_cast<int64_t>(request.body.size() / 4);
  const int64_t block_size = block_size_;
  if (options_.routing.policy != RoutingPolicy::kPrefix || block_size <= 0) return {};
  PromptForRouting prompt = RoutingPrompt(request.path, request.body);
  if (!prompt.tokenize_body.empty()) {
    // Any replica that is up tokenizes it, as the one that answers will.
    for (int i = 0; i < options_.replicas && prompt.tokens.empty(); ++i) {
      const int r = static_cast<int>((next_tokenizer_++) % options_.replicas);
      const Endpoint endpoint = ReplicaEndpoint(r);
      if (!router_.up(r) || endpoint.port == 0) continue;
      httplib::Client client(endpoint.host, endpoint.port);
      client.set_connection_timeout(0, 500000);
      client.set_read_timeout(2, 0);  // Routing waits on it: a slow replica is passed over.
      httplib::Headers headers;
      if (const absl::string_view key = request.Header("Authorization"); !key.empty()) {
        headers.emplace("Authorization", std::string(key));
      }
      const httplib::Result got = client.Post("/tokenize", headers, prompt.tokenize_body, "application/json");
      if (!got) continue;  // Unreachable or slow: another one.
      if (got->status != 200) break;  // The replica will say what is wrong with the request.
      const json answer = json::parse(got->body, nullptr, /*allow_exceptions=*/false);
      if (!answer.is_object() || !answer.contains("tokens") || !answer["tokens"].is_array()) break;
      for (const json& id : answer["tokens"]) prompt.tokens.push_back(id.get<int>());
    }
  }
  if (prompt.tokens.empty()) return {};
  *tokens = static_cast<int64_t>(prompt.tokens.size());
  std::vector<uint64_t> blocks;
  uint64_t parent = 0;
  for (int64_t b = 0; (b + 1) * block_size <= static_cast<int64_t>(prompt.tokens.size()); ++b) {
    parent = KvBlockPool::ChainHash(parent, absl::MakeConstSpan(prompt.tokens).subspan(b * block_size, block_size));
    blocks.push_back(parent);
  }
  return blocks;
}

void ServeFrontEnd::Proxy(const std::shared_ptr<http::Exchange>& exchange) {
  if (draining_) {
    return Reply(exchange, {503, "the server is draining: it takes no new requests", "server_error", "", "draining"});
  }
  const http::Request& request = exchange->request();
  int64_t tokens = 0;
  const std::vector<uint64_t> blocks = PromptBlocks(request, &tokens);
  std::optional<http::Response> turned_away;
  // A replica that refuses the connection has just died, one that answers
  // 503 is not serving: try the others.
  for (int attempt = 0; attempt < options_.replicas; ++attempt) {
    if (exchange->client_gone()) return;
    const int replica = router_.Route(blocks, tokens);
    if (replica < 0) break;
    const Endpoint endpoint = ReplicaEndpoint(replica);
    http::Response refusal;
    const Forwarded forwarded =
        endpoint.port > 0 ? Forward(exchange, replica, endpoint.host, endpoint.port, &refusal) : Forwarded::kNotReached;
    router_.Finished(replica, tokens);
    if (forwarded == Forwarded::kAnswered) return;
    if (forwarded == Forwarded::kTurnedAway) turned_away = std::move(refusal);
    if (router_.up(replica)) {
      LOG(WARNING) << "replica " << replica << " is down: "
                   << (forwarded == Forwarded::kTurnedAway ? "it answered 503" : "it refused a connection");
    }
    router_.SetUp(replica, false);
  }
  if (turned_away.has_value()) return exchange->Respond(*std::move(turned_away));
  Reply(exchange, {503,
                   absl::StrFormat("no replica is up (0 of %d); /health says when one is back", options_.replicas),
                   "server_error", "", "no_replica"});
}

ServeFrontEnd::Forwarded ServeFrontEnd::Forward(const std::shared_ptr<http::Exchange>& exchange, int replica,
                                                const std::string& host, int port, http::Response* turned_away) {
  const http::Request& request = exchange->request();
  auto client = std::make_shared<httplib::Client>(host, port);
  {
    absl::MutexLock lock(&upstream_mutex_);
    upstream_.insert(client);
  }
  const auto forget = absl::MakeCleanup([&] {
    absl::MutexLock lock(&upstream_mutex_);
    upstream_.erase(client);
  });
  client->set_connection_timeout(2, 0);
  client->set_read_timeout(24 * 3600, 0);  // An answer may take long; the client's going away ends it.
  client->set_write_timeout(60, 0);
  // The client going away closes the replica's connection, which cancels
  // the generation there.
  exchange->OnClientGone([client] { client->stop(); });

  httplib::Request upstream;
  upstream.method = request.method;
  upstream.path = request.target;
  for (absl::string_view name : kRequestHeaders) {
    const absl::string_view value = request.Header(name);
    if (!value.empty()) upstream.headers.emplace(std::string(name), std::string(value));
  }
  upstream.body = request.body;
  bool head_seen = false, streaming = false;
  bool event_open = false;  // The stream's last bytes end mid-event.
  http::Response answer;
  upstream.response_handler = [&](const httplib::Response& head) {
    head_seen = true;
    answer.status = head.status;
    answer.content_type = head.get_header_value("Content-Type");
    for (absl::string_view name : kAnswerHeaders) {
      if (head.has_header(std::string(name).c_str())) {
        answer.headers.emplace_back(std::string(name), head.get_header_value(std::string(name).c_str()));
      }
    }
    streaming = absl::StartsWith(answer.content_type, "text/event-stream");
    if (streaming) exchange->StartStream(answer.status, answer.content_type, answer.headers);
    return true;
  };
  upstream.content_receiver = [&](const char* data, size_t length, uint64_t, uint64_t) {
    if (streaming) {
      std::string chunk(data, length);
      event_open = !absl::EndsWith(chunk, "\n\n");
      exchange->Send(std::move(chunk));
    } else {
      answer.body.append(data, length);
    }
    return !exchange->client_gone();
  };
  httplib::Response response;
  httplib::Error error = httplib::Error::Success;
  const bool ok = client->send(upstream, response, error);
  if (exchange->client_gone()) return Forwarded::kAnswered;
  if (ok && !streaming && answer.status == 503) {
    *turned_away = std::move(answer);
    return Forwarded::kTurnedAway;
  }
  if (ok) {
    if (streaming) {
      exchange->End();
    } else {
      exchange->Respond(std::move(answer));
    }
    return Forwarded::kAnswered;
  }
  if (!head_seen && error == httplib::Error::Connection) return Forwarded::kNotReached;
  // The replica took the request and failed (its rank was killed): the
  // answer is cut, and said to be. Whether the replica is down is for its
  // supervisor and its /health to say, not for one failed exchange.
  const ApiError failed = ReplicaFailed(replica, httplib::to_string(error));
  LOG(WARNING) << failed.message;
  if (streaming) {
    exchange->Send(absl::StrCat(event_open ? "\n\n" : "", Sse(json::parse(failed.Json())), "data: [DONE]\n\n"));
    exchange->End();
  } else {
    Reply(exchange, failed);
  }
  return Forwarded::kAnswered;
}

}  // namespace llama
