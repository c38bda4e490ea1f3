// launcher serve --data_parallel_size=2 end to end on the fixture
// checkpoint: greedy answers under concurrent load equal PyTorch's goldens
// (each replica is load-invariant), and a replica whose rank is killed, 20
// times in a row under load, fails only its own answers in flight (each
// with an error, never a hang), serves again within 30 s while the other
// never stops answering, and leaves no process behind and the launcher's
// memory flat.

#include <signal.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <regex>
#include <set>
#include <thread>

#include <httplib.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "base/net.h"
#include "checkpoint/checkpoint_fixture.h"
#include "tests/launcher_run.h"
#include "tokenizer/tokenizer_fixture.h"

namespace llama::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using ::testing::HasSubstr;

// Starts two one-rank replicas of the fixture behind one port; returns the
// port once both are up (0 if they never were).
int StartReplicas(LauncherRun& run, const std::string& name, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"serve", "--ckpt_dir=" + CheckpointFixturePath("tiny_fp32_mp1"),
                                   "--tokenizer_path=" + TokenizerFixturePath("tokenizer.model"),
                                   absl::StrCat("--shard_dir=", TempDir(), "/replica_shards"),
                                   absl::StrCat("--log_dir=", TempDir(), "/", name, "/logs"), "--nproc_per_node=1",
                                   "--data_parallel_size=2", "--port=0", "--max_seq_len=128", "--grace_period=2"};
  args.insert(args.end(), extra.begin(), extra.end());
  run = Launch(name, args);
  const std::regex url("serving tiny_fp32_mp1 on http://127.0.0.1:([0-9]+)/v1 \\(2 replicas of 1 rank");
  for (int i = 0; i < 600; ++i) {
    std::smatch match;
    const std::string err = run.err();
    if (std::regex_search(err, match, url)) {
      const int port = std::stoi(match[1]);
      httplib::Client client("127.0.0.1", port);
      for (int j = 0; j < 300; ++j) {
        if (httplib::Result health = client.Get("/health"); health && health->status == 200 &&
                                                            json::parse(health->body)["status"] == "ok") {
          return port;
        }
        std::this_thread::sleep_for(100ms);
      }
      break;
    }
    if (run.process->Poll().has_value()) break;
    std::this_thread::sleep_for(100ms);
  }
  ADD_FAILURE() << "the replicas never came up:\n" << run.err();
  return 0;
}

std::string Status(int port) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(5, 0);
  httplib::Result health = client.Get("/health");
  return health ? json::parse(health->body).value("status", "") : "";
}

int64_t RssKb(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

TEST(LauncherReplicasTest, GreedyAnswersUnderLoadEqualPyTorch) {
  LauncherRun run;
  const int port = StartReplicas(run, "replicas_golden");
  ASSERT_GT(port, 0);
  std::atomic<int> wrong{0}, answered{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 16; ++c) {
    clients.emplace_back([&, c] {
      httplib::Client client("127.0.0.1", port);
      client.set_read_timeout(120, 0);
      const json& goldens = Golden()["text_completions"];
      for (size_t i = 0; i < goldens.size(); ++i) {
        const json& golden = goldens[(i + c) % goldens.size()];
        httplib::Result r = client.Post(
            "/v1/completions",
            json{{"model", "tiny_fp32_mp1"}, {"prompt", golden["prompt"]}, {"max_tokens", 32}, {"temperature", 0}}
                .dump(),
            "application/json");
        const std::vector<int> ids = golden["token_ids"].get<std::vector<int>>();
        if (!r || r->status != 200 || json::parse(r->body)["choices"][0]["text"] != *FixtureTokenizer().Decode(ids)) {
          ++wrong;
          ADD_FAILURE() << "client " << c << ": " << (r ? r->body : httplib::to_string(r.error()));
        }
        ++answered;
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(answered, 16 * static_cast<int>(Golden()["text_completions"].size()));
  // Both replicas took a share, and the metrics say so.
  httplib::Client client("127.0.0.1", port);
  httplib::Result metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  for (int r = 0; r < 2; ++r) {
    std::smatch match;
    const std::regex routed(absl::StrCat("llama_router_requests_total\\{replica=\"", r, "\",by=\"load\"\\} ([0-9]+)"));
    ASSERT_TRUE(std::regex_search(metrics->body, match, routed)) << metrics->body;
    EXPECT_GT(std::stoi(match[1]), 0) << "replica " << r;
  }
  EXPECT_THAT(metrics->body, HasSubstr("replica=\"1\""));
  run.process->SignalGroup(SIGTERM);
  EXPECT_EQ(ExitCodeOf(run, 60s), 0) << run.err();
  EXPECT_THAT(run.err(), HasSubstr("the replicas drained and stopped"));
}

TEST(LauncherReplicasTest, AKilledReplicaComesBackWhileTheOtherServes) {
  LauncherRun run;
  const int port = StartReplicas(run, "replicas_kill", {"--max_restarts=20", "--routing=round_robin"});
  ASSERT_GT(port, 0);
  std::atomic<bool> stop{false};
  std::atomic<int> answered{0};
  std::mutex mutex;
  std::vector<std::string> bad;  // Anything but an answer or an engine_failed 503.
  int failed = 0;
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&] {
      httplib::Client client("127.0.0.1", port);
      client.set_read_timeout(30, 0);
      while (!stop) {
        httplib::Result r = client.Post(
            "/v1/completions",
            json{{"model", "tiny_fp32_mp1"}, {"prompt", "Hello"}, {"max_tokens", 16}, {"temperature", 0}}.dump(),
            "application/json");
        std::lock_guard<std::mutex> lock(mutex);
        if (r && r->status == 200) {
          ++answered;
        } else if (r && r->status == 503 && json::parse(r->body)["error"]["code"] == "engine_failed") {
          ++failed;
        } else {
          bad.push_back(r ? absl::StrCat(r->status, " ", r->body) : httplib::to_string(r.error()));
        }
      }
    });
  }
  std::set<pid_t> seen;
  int64_t rss_after_five = 0;
  for (int kill = 0; kill < 20; ++kill) {
    const std::vector<pid_t> workers = ChildrenOf(run.process->pid());
    ASSERT_EQ(workers.size(), 2u) << "kill " << kill;
    seen.insert(workers.begin(), workers.end());
    const int before = answered;
    ASSERT_EQ(::kill(workers[kill % 2], SIGKILL), 0);
    const auto killed = std::chrono::steady_clock::now();
    // Down within the probe's period, then back.
    while (Status(port) == "ok" && std::chrono::steady_clock::now() - killed < 5s) std::this_thread::sleep_for(20ms);
    while (Status(port) != "ok" && std::chrono::steady_clock::now() - killed < 30s) std::this_thread::sleep_for(50ms);
    EXPECT_EQ(Status(port), "ok") << "kill " << kill << ": not back in 30 s";
    std::printf("kill %d: back in %.2f s, %d answers meanwhile\n", kill,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count(),
                static_cast<int>(answered - before));
    EXPECT_GT(answered - before, 0) << "kill " << kill << ": no answers while the replica was down";
    if (kill == 4) rss_after_five = RssKb(run.process->pid());
  }
  stop = true;
  for (std::thread& t : clients) t.join();
  EXPECT_TRUE(bad.empty()) << bad.size() << " answers neither given nor failed honestly, e.g. " << bad[0];
  std::printf("%d answered, %d failed with engine_failed over 20 kills\n", answered.load(), failed);
  const int64_t rss = RssKb(run.process->pid());
  std::printf("launcher RSS: %lld kB after 5 kills, %lld kB after 20\n", static_cast<long long>(rss_after_five),
              static_cast<long long>(rss));
  EXPECT_LT(rss - rss_after_five, 16 * 1024);
  const std::vector<pid_t> last = ChildrenOf(run.process->pid());
  seen.insert(last.begin(), last.end());
  EXPECT_EQ(seen.size(), 22u);  // Two, and one more per kill.
  run.process->SignalGroup(SIGTERM);
  EXPECT_EQ(ExitCodeOf(run, 60s), 0) << run.err();
  EXPECT_TRUE(AllGone(std::vector<pid_t>(seen.begin(), seen.end())));
  EXPECT_THAT(run.err(), HasSubstr("replica 0 is down (rank 0 signal 9"));
}

// Replicas that cannot start (a KV cache larger than the machine) fail
// past --max_restarts and the launcher ends, naming one failure, instead of
// serving nothing forever.
TEST(LauncherReplicasTest, ReplicasThatNeverServeEndTheLauncher) {
  LauncherRun run = Launch(
      "replicas_never_serve",
      {"serve", "--ckpt_dir=" + CheckpointFixturePath("tiny_fp32_mp1"),
       "--tokenizer_path=" + TokenizerFixturePath("tokenizer.model"),
       absl::StrCat("--shard_dir=", TempDir(), "/replica_shards"),
       absl::StrCat("--log_dir=", TempDir(), "/replicas_never_serve/logs"), "--nproc_per_node=1",
       "--data_parallel_size=2", "--port=0", "--max_restarts=1", "--kv_cache_gb=100000"});
  EXPECT_NE(ExitCodeOf(run, 90s), 0);
  EXPECT_THAT(run.err(), HasSubstr("no replica is left (each failed past --max_restarts=1); one: rank 0"));
  EXPECT_THAT(run.err(), HasSubstr("restart 1 of 1 in 2.0 s"));  // Failed before serving: the back-off doubles.
  EXPECT_THAT(run.err(), HasSubstr("failed 2 time(s), --max_restarts=1: not started again"));
}

// Replicas on two nodes (two launchers on this host, --nnodes=2): node 0's
// front end routes to node 1's replica through the registry; when node 0's
// launcher dies (SIGKILL: no drain, no goodbye), node 1 stops its replica
// by itself once node 0 has been unreachable for 30 s, since nothing
// routes to it any more, and leaves no process.
TEST(LauncherReplicasTest, ANodeWhoseFrontEndDiesStopsItsReplicas) {
  // Held, so that nobody else takes it, until node 0's launcher has (SO_REUSEADDR).
  absl::StatusOr<net::Socket> reserved = net::ReservePort();
  ASSERT_TRUE(reserved.ok()) << reserved.status();
  const int master_port = *net::LocalPort(*reserved);
  const auto node = [&](int rank, const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> args = {"serve", "--ckpt_dir=" + CheckpointFixturePath("tiny_fp32_mp1"),
                                     "--tokenizer_path=" + TokenizerFixturePath("tokenizer.model"),
                                     absl::StrCat("--shard_dir=", TempDir(), "/replica_shards"),
                                     absl::StrCat("--log_dir=", TempDir(), "/", name, "/logs"),
                                     "--nproc_per_node=1", "--data_parallel_size=2", "--nnodes=2",
                                     absl::StrCat("--node_rank=", rank), "--master_addr=127.0.0.1",
                                     absl::StrCat("--master_port=", master_port), "--max_seq_len=128",
                                     "--grace_period=2"};
    args.insert(args.end(), extra.begin(), extra.end());
    return Launch(name, args, {"RENDEZVOUS_TOKEN=two-node-test"});
  };
  LauncherRun node0 = node(0, "replicas_node0", {"--port=0", "--routing=round_robin"});
  LauncherRun node1 = node(1, "replicas_node1", {});
  int port = 0;
  const std::regex url("serving tiny_fp32_mp1 on http://127.0.0.1:([0-9]+)/v1 \\(2 replicas of 1 rank\\(s\\) on 2 node");
  for (int i = 0; i < 600 && port == 0; ++i) {
    std::smatch match;
    const std::string err = node0.err();
    if (std::regex_search(err, match, url)) port = std::stoi(match[1]);
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_GT(port, 0) << node0.err() << node1.err();
  for (int i = 0; i < 300 && Status(port) != "ok"; ++i) std::this_thread::sleep_for(100ms);
  ASSERT_EQ(Status(port), "ok") << node0.err() << node1.err();
  // Round robin: one answer from each node's replica.
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(60, 0);
  for (int i = 0; i < 2; ++i) {
    httplib::Result r = client.Post(
        "/v1/completions",
        json{{"model", "tiny_fp32_mp1"}, {"prompt", "Hello"}, {"max_tokens", 4}, {"temperature", 0}}.dump(),
        "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
  }
  httplib::Result metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_THAT(metrics->body, HasSubstr("llama_router_requests_total{replica=\"1\",by=\"load\"} 1\n"));
  std::vector<pid_t> workers = ChildrenOf(node1.process->pid());
  ASSERT_EQ(workers.size(), 1u);
  node0.process->SignalGroup(SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  EXPECT_EQ(ExitCodeOf(node1, 90s), 0) << node1.err();
  // Node 0 unreachable for ReplicaPublisher::kLostAfter (30 s), then a drain.
  EXPECT_LT(std::chrono::steady_clock::now() - killed, 45s);
  EXPECT_THAT(node1.err(), HasSubstr("node 0's replica registry has been unreachable for 30s"));
  EXPECT_THAT(node1.err(), HasSubstr("the replicas drained and stopped"));
  EXPECT_TRUE(AllGone(workers));
}

}  // namespace
}  // namespace llama::testing
