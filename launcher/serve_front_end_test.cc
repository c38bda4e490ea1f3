#include "launcher/serve_front_end.h"

#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "worker/engine/kv_block_pool.h"
#include "worker/http/http_server.h"

namespace llama {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using ::testing::HasSubstr;

// A stand-in for a replica's rank 0: /health, /metrics and completions
// that say which replica answered; a prompt "stream and die" streams one
// event, then the server goes away mid-answer. Its "tokenizer" makes a
// token of each byte, its KV blocks hold 4 tokens, and it says in
// /v1/kv_cache_events which blocks it cached (every completed prompt's)
// and evicted (EvictAll).
class FakeReplica {
 public:
  static constexpr int kBlockSize = 4;

  explicit FakeReplica(int id) : id_(id), server_(http::ServerOptions{}) {
    server_.Handle({"POST", "/tokenize", nullptr, [](std::shared_ptr<http::Exchange> e) {
                      const std::string prompt = json::parse(e->request().body)["prompt"];
                      e->Respond({200, "application/json", json{{"tokens", Tokens(prompt)}}.dump(), {}});
                    }});
    server_.Handle({"GET", "/v1/kv_cache_events", nullptr,
                    [this](std::shared_ptr<http::Exchange> e) {
                      const std::string& target = e->request().target;
                      const size_t after = std::stoul(target.substr(target.find("after=") + 6));
                      json events = json::array();
                      std::lock_guard<std::mutex> lock(mutex_);
                      for (size_t n = after; n < events_.size(); ++n) events.push_back(events_[n]);
                      e->Respond({200, "application/json",
                                  json{{"next", events_.size()}, {"reset", false}, {"block_size", kBlockSize},
                                       {"events", events}}
                                      .dump(),
                                  {}});
                    },
                    true});
    server_.Handle({"GET", "/health", nullptr,
                    [](std::shared_ptr<http::Exchange> e) { e->Respond({200, "application/json", R"({"status":"ok"})", {}}); },
                    true});
    server_.Handle({"GET", "/metrics", nullptr,
                    [this](std::shared_ptr<http::Exchange> e) {
                      e->Respond({200, "text/plain",
                                  absl::StrCat("# HELP llama_requests_total Requests.\n# TYPE llama_requests_total "
                                               "counter\nllama_requests_total{status=\"ok\"} ",
                                               10 + id_, "\n"),
                                  {}});
                    },
                    true});
    server_.Handle({"POST", "/v1/completions", nullptr, [this](std::shared_ptr<http::Exchange> e) { Complete(e); }});
  }
  absl::Status Start() { return server_.Start(); }
  void Stop() { server_.Stop(); }
  int port() const { return server_.port(); }

  static std::vector<int> Tokens(const std::string& text) { return std::vector<int>(text.begin(), text.end()); }

  void EvictAll() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (uint64_t hash : cached_) events_.push_back({{"stored", false}, {"hash", absl::StrFormat("%016x", hash)}});
    cached_.clear();
  }

 private:
  void Cache(const std::string& prompt) {
    const std::vector<int> tokens = Tokens(prompt);
    std::lock_guard<std::mutex> lock(mutex_);
    uint64_t parent = 0;
    for (size_t b = 0; (b + 1) * kBlockSize <= tokens.size(); ++b) {
      parent = KvBlockPool::ChainHash(parent, absl::MakeConstSpan(tokens).subspan(b * kBlockSize, kBlockSize));
      if (cached_.insert(parent).second) {
        events_.push_back({{"stored", true}, {"hash", absl::StrFormat("%016x", parent)}});
      }
    }
  }

  void Complete(const std::shared_ptr<http::Exchange>& e) {
    const json request = json::parse(e->request().body);
    if (request["prompt"].is_string()) Cache(request["prompt"]);
    if (request["prompt"] == "unavailable" && id_ == 0) {  // As a replica that is loading or draining.
      e->Respond({503, "application/json", R"({"error":{"message":"the model is loading"}})", {}});
      return;
    }
    if (!request.value("stream", false)) {
      e->Respond({200, "application/json", json{{"replica", id_}, {"prompt", request["prompt"]}}.dump(), {}});
      return;
    }
    e->StartStream(200, "text/event-stream");
    e->Send(absl::StrCat("data: {\"replica\":", id_, "}\n\n"));
    if (request["prompt"] == "stream and die") {
      std::this_thread::sleep_for(100ms);
      // Stopping from a worker thread of its own would join itself.
      std::thread([this] { server_.Stop(); }).detach();
      return;
    }
    e->Send("data: {\"text\":\"b\"}\n\n");
    e->Send("data: [DONE]\n\n");
    e->End();
  }

  int id_;
  std::mutex mutex_;
  std::set<uint64_t> cached_;
  std::vector<json> events_;
  http::Server server_;
};

class FrontEndTest : public ::testing::Test {
 protected:
  void StartAll(int n, RoutingPolicy policy = RoutingPolicy::kPrefix, std::vector<std::string> keys = {}) {
    FrontEndOptions options;
    options.replicas = n;
    options.api_keys = std::move(keys);
    options.routing.policy = policy;
    options.probe_interval = absl::Milliseconds(20);
    options.max_concurrent_requests = 8;
    front_ = std::make_unique<ServeFrontEnd>(options);
    ASSERT_TRUE(front_->Start().ok());
    for (int r = 0; r < n; ++r) {
      replicas_.push_back(std::make_unique<FakeReplica>(r));
      ASSERT_TRUE(replicas_.back()->Start().ok());
      front_->ReplicaReady(r, "127.0.0.1", replicas_.back()->port());
    }
    WaitForUp(n);
  }
  void WaitForUp(int n) {
    for (int i = 0; i < 500 && front_->router().replicas_up() != n; ++i) std::this_thread::sleep_for(10ms);
    ASSERT_EQ(front_->router().replicas_up(), n);
  }
  httplib::Result Complete(const std::string& prompt, bool stream = false) {
    httplib::Client client("127.0.0.1", front_->port());
    client.set_read_timeout(10, 0);
    return client.Post("/v1/completions", json{{"model", "m"}, {"prompt", prompt}, {"stream", stream}}.dump(),
                       "application/json");
  }
  json Health() {
    httplib::Client client("127.0.0.1", front_->port());
    httplib::Result r = client.Get("/health");
    return r ? json{{"code", r->status}, {"body", json::parse(r->body)}} : json();
  }

  std::vector<std::unique_ptr<FakeReplica>> replicas_;
  std::unique_ptr<ServeFrontEnd> front_;
};

TEST_F(FrontEndTest, UsersOfASystemPromptLandWhereItWasSent) {
  StartAll(2);
  std::vector<int> home(4, -1);
  for (int user = 0; user < 20; ++user) {
    const int s = user % 4;
    const std::string prompt = std::string(300, static_cast<char>('a' + s)) + " user " + std::to_string(user);
    httplib::Result r = Complete(prompt);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json answer = json::parse(r->body);
    EXPECT_EQ(answer["prompt"], prompt);  // The body passed through.
    const int replica = answer["replica"];
    if (home[s] < 0) home[s] = replica;
    EXPECT_EQ(replica, home[s]) << "user " << user;
  }
  // The four prompts' first requests were spread.
  EXPECT_EQ(std::count(home.begin(), home.end(), 0), 2);
}

// What a replica evicts stops drawing its prompt there.
TEST_F(FrontEndTest, APrefixTheReplicaEvictedDrawsNothing) {
  StartAll(2);
  const std::string prompt = std::string(64, 'p') + " the question";
  httplib::Result first = Complete(prompt);
  ASSERT_TRUE(first);
  const int home = json::parse(first->body)["replica"];
  const auto by_prefix = [&] { return front_->router().counts(0).prefix_routed + front_->router().counts(1).prefix_routed; };
  ASSERT_TRUE(Complete(prompt));
  EXPECT_EQ(by_prefix(), 1);
  replicas_[home]->EvictAll();
  std::this_thread::sleep_for(200ms);  // A few probes: the events are read.
  ASSERT_TRUE(Complete(prompt));
  EXPECT_EQ(by_prefix(), 1) << "routed by a prefix the replica had evicted";
}

TEST_F(FrontEndTest, StreamsPassThroughAndAReplicaDyingMidAnswerSaysSo) {
  StartAll(2, RoutingPolicy::kRoundRobin);
  httplib::Result whole = Complete("x", /*stream=*/true);
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->status, 200);
  EXPECT_THAT(whole->get_header_value("Content-Type"), HasSubstr("text/event-stream"));
  EXPECT_EQ(whole->body, "data: {\"replica\":0}\n\ndata: {\"text\":\"b\"}\n\ndata: [DONE]\n\n");

  httplib::Result cut = Complete("stream and die", /*stream=*/true);  // Replica 1's turn.
  ASSERT_TRUE(cut);
  EXPECT_THAT(cut->body, HasSubstr("data: {\"replica\":1}\n\n"));
  EXPECT_THAT(cut->body, HasSubstr("\"code\":\"engine_failed\""));
  EXPECT_THAT(cut->body, HasSubstr("replica 1 failed during the answer"));
  EXPECT_THAT(cut->body, ::testing::EndsWith("data: [DONE]\n\n"));
  // Its /health no longer answers: the prober takes it out.
  for (int i = 0; i < 200 && front_->router().up(1); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_FALSE(front_->router().up(1));

  json health = Health();
  EXPECT_EQ(health["code"], 200);
  EXPECT_EQ(health["body"]["status"], "degraded");
  EXPECT_EQ(health["body"]["replicas_up"], 1);
  // Everything now goes to the replica that is left.
  for (int i = 0; i < 4; ++i) {
    httplib::Result r = Complete("after");
    ASSERT_TRUE(r);
    EXPECT_EQ(json::parse(r->body)["replica"], 0);
  }
}

TEST_F(FrontEndTest, ARefusedConnectionIsTriedOnAnotherReplica) {
  StartAll(2, RoutingPolicy::kRoundRobin);
  replicas_[0]->Stop();  // Before the prober has noticed.
  for (int i = 0; i < 3; ++i) {
    httplib::Result r = Complete("hello");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(json::parse(r->body)["replica"], 1);
  }
  front_->ReplicaDown(1);
  httplib::Result none = Complete("hello");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 503);
  EXPECT_EQ(json::parse(none->body)["error"]["code"], "no_replica");
  EXPECT_EQ(Health()["code"], 503);
  EXPECT_EQ(Health()["body"]["status"], "down");
}

// A replica that answers 503 before answering (loading, draining, a
// failed engine) is passed over: the request goes to another one.
TEST_F(FrontEndTest, A503IsTriedOnAnotherReplicaAndAKeyIsCheckedFirst) {
  StartAll(2, RoutingPolicy::kRoundRobin, {"s3cret"});
  httplib::Client client("127.0.0.1", front_->port());
  const std::string body = json{{"model", "m"}, {"prompt", "unavailable"}}.dump();
  httplib::Result refused = client.Post("/v1/completions", body, "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 401);
  EXPECT_EQ(json::parse(refused->body)["error"]["code"], "invalid_api_key");
  client.set_bearer_token_auth("s3cret");
  httplib::Result r = client.Post("/v1/completions", body, "application/json");  // Replica 0's turn.
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["replica"], 1);
}

TEST_F(FrontEndTest, MetricsHaveEachReplicaAndTheirSum) {
  StartAll(2);
  ASSERT_TRUE(Complete("a"));
  httplib::Client client("127.0.0.1", front_->port());
  httplib::Result r = client.Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_THAT(r->body, HasSubstr("# TYPE llama_requests_total counter\n"
                                 "llama_requests_total{status=\"ok\"} 21\n"
                                 "llama_requests_total{replica=\"0\",status=\"ok\"} 10\n"
                                 "llama_requests_total{replica=\"1\",status=\"ok\"} 11\n"));
  EXPECT_THAT(r->body, HasSubstr("llama_router_replicas_up 2\n"));
  EXPECT_THAT(r->body, HasSubstr("llama_router_requests_total{replica=\"0\",by=\"load\"} 1\n"));
}

TEST_F(FrontEndTest, HealthIsLoadingUntilAReplicaIsUp) {
  FrontEndOptions options;
  options.replicas = 2;
  front_ = std::make_unique<ServeFrontEnd>(options);
  ASSERT_TRUE(front_->Start().ok());
  EXPECT_EQ(Health()["code"], 503);
  EXPECT_EQ(Health()["body"]["status"], "loading");
}

TEST(MergeReplicaMetricsTest, QuantilesAreNotSummedAndFamiliesStayTogether) {
  const std::string a =
      "# TYPE t summary\nt{quantile=\"0.5\"} 1\nt_sum 4\nt_count 2\n# TYPE g gauge\ng 1\n";
  const std::string b = "# TYPE t summary\nt{quantile=\"0.5\"} 3\nt_sum 6\nt_count 3\n# TYPE g gauge\ng 2\n";
  EXPECT_EQ(MergeReplicaMetrics({a, b}),
            "# TYPE t summary\nt_sum 10\nt_count 5\n"
            "t{replica=\"0\",quantile=\"0.5\"} 1\nt_sum{replica=\"0\"} 4\nt_count{replica=\"0\"} 2\n"
            "t{replica=\"1\",quantile=\"0.5\"} 3\nt_sum{replica=\"1\"} 6\nt_count{replica=\"1\"} 3\n"
            "# TYPE g gauge\ng 3\ng{replica=\"0\"} 1\ng{replica=\"1\"} 2\n");
  // A replica that did not answer adds nothing.
  EXPECT_EQ(MergeReplicaMetrics({"", "# TYPE g gauge\ng 2\n"}), "# TYPE g gauge\ng 2\ng{replica=\"1\"} 2\n");
}

TEST(RoutingPromptTest, PromptsAsIdsOrAsTheServerTokenizesThem) {
  EXPECT_EQ(RoutingPrompt("/v1/completions", R"({"model":"m","prompt":"hello"})").tokenize_body,
            R"({"model":"m","prompt":"hello"})");
  EXPECT_EQ(RoutingPrompt("/v1/completions", R"({"model":"m","prompt":["a","b"]})").tokenize_body,
            R"({"model":"m","prompt":"a"})");
  EXPECT_EQ(RoutingPrompt("/v1/completions", R"({"model":"m","prompt":[1,2,3]})").tokens, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(RoutingPrompt("/v1/completions", R"({"model":"m","prompt":[[4,5],[6]]})").tokens, (std::vector<int>{4, 5}));
  EXPECT_EQ(RoutingPrompt("/v1/chat/completions",
                          R"({"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[1]})")
                .tokenize_body,
            R"({"messages":[{"content":"hi","role":"user"}],"model":"m","tools":[1]})");
  EXPECT_TRUE(RoutingPrompt("/v1/completions", "not json").tokenize_body.empty());
  EXPECT_TRUE(RoutingPrompt("/v1/completions", R"({"prompt":"no model"})").tokenize_body.empty());
  EXPECT_TRUE(RoutingPrompt("/tokenize", R"({"model":"m","prompt":"hello"})").tokenize_body.empty());
}

}  // namespace
}  // namespace llama
