// The one endpoint of a data-parallel server (launcher serve
// --data_parallel_size=N): N replicas, each a complete engine whose rank 0
// serves the OpenAI API on a loopback port of its own, behind this front
// end on --host:--port.
//
// - The API's routes are passed to the replica the router picks
//   (launcher/replica_router.h), answers and streams as the replica sends
//   them. The API key and the limits on a request are checked here as a
//   replica checks them (and again there).
// - A request that cannot reach its replica (connection refused: it just
//   died) or that it turns away with a 503 before answering (loading,
//   draining, its engine failed) goes to another one, and that replica
//   leaves routing until its /health is ok again. A request is never sent
//   again once a replica took it and then failed (a request that kills
//   replicas must not kill them all): a replica that fails during an
//   answer ends that answer with the error a replica gives when its engine
//   fails (503 with code "engine_failed", or that error as the stream's
//   last event), never a cut answer presented as whole.
// - /health is "ok" with every replica up, "degraded" (200, saying how many
//   are up) with some, "loading" before the first is up and "down"
//   without one (both 503).
// - /metrics has each replica's series with a replica="i" label, their sums
//   without it, and the router's own.
// - Replicas are probed on their /health; the supervisor (ReplicaSet) says
//   when one's ranks are gone, which takes it out of routing at once.

#ifndef LLAMA_LAUNCHER_SERVE_FRONT_END_H_
#define LLAMA_LAUNCHER_SERVE_FRONT_END_H_

#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "launcher/replica_directory.h"
#include "launcher/replica_router.h"
#include "worker/http/http_server.h"

namespace httplib {
class Client;
}  // namespace httplib

namespace llama {

struct FrontEndOptions {
  std::string host = "127.0.0.1";
  int port = 0;
  int replicas = 1;
  // The server's own (worker/serving_flags.h): the front end refuses what a
  // replica would, before anything reaches one.
  http::Limits limits;
  bool access_log = false;
  std::vector<std::string> api_keys;
  RouterOptions routing;
  absl::Duration probe_interval = absl::Milliseconds(250);
  // Answers are proxied by blocking threads: at most this many at once
  // (more wait for one).
  int max_concurrent_requests = 256;
};

class ServeFrontEnd : public ReplicaDirectory {
 public:
  explicit ServeFrontEnd(FrontEndOptions options);
  ~ServeFrontEnd() override;  // Stops.
  ServeFrontEnd(const ServeFrontEnd&) = delete;
  ServeFrontEnd& operator=(const ServeFrontEnd&) = delete;

  // Binds --host:--port (a busy port is an error naming it) and starts
  // probing.
  absl::Status Start();
  int port() const { return http_.port(); }

  // ReplicaDirectory: where each replica serves (probed until its /health
  // is ok), and when its ranks have failed (routed nothing more at once).
  void ReplicaReady(int replica, const std::string& host, int port) override;
  void ReplicaDown(int replica) override;
  // New requests get 503 ("draining"); answers in flight go on.
  void SetDraining() { draining_ = true; }
  // Waits up to `timeout` for the answers in flight to end (the other
  // nodes' replicas drain on their own clocks).
  void WaitForAnswers(absl::Duration timeout) const;
  void Stop();

  const ReplicaRouter& router() const { return router_; }

 private:
  // kTurnedAway: the replica answered 503 before any byte reached the
  // client (kept in *turned_away, for when every replica does).
  enum class Forwarded { kAnswered, kNotReached, kTurnedAway };
  void Proxy(const std::shared_ptr<http::Exchange>& exchange);
  Forwarded Forward(const std::shared_ptr<http::Exchange>& exchange, int replica, const std::string& host, int port,
                    http::Response* turned_away);
  // The chain hashes of the request's prompt's full blocks (prefix
  // routing, once a replica said its block size), and its token count
  // (the request's bytes / 4 when unknown).
  std::vector<uint64_t> PromptBlocks(const http::Request& request, int64_t* tokens);
  // Applies `replica`'s new cache events to the router.
  void ReadCacheEvents(int replica, const std::string& host, int port);
  void Health(const std::shared_ptr<http::Exchange>& exchange) const;
  void Metrics(const std::shared_ptr<http::Exchange>& exchange) const;
  void ProbeLoop();
  struct Endpoint {
    std::string host;
    int port = 0;  // 0: no server (down, or starting).
  };
  Endpoint ReplicaEndpoint(int replica) const;

  const FrontEndOptions options_;
  ReplicaRouter router_;
  http::Server http_;
  mutable absl::Mutex mutex_;
  std::vector<Endpoint> endpoints_;
  std::vector<uint64_t> event_cursors_;  // Per replica: the `next` of its last events (0: from its start).
  std::vector<std::string> event_epochs_;  // Per replica: its journal's epoch ("" until read).
  std::atomic<int64_t> block_size_{0};  // The engines' KV block size; 0 until one says.
  std::atomic<uint32_t> next_tokenizer_{0};
  // Per replica, bumped by ReplicaReady and ReplicaDown: a probe's verdict
  // counts only if none came in between.
  std::vector<uint64_t> generations_;
  std::atomic<bool> draining_{false};
  std::atomic<bool> ever_up_{false};
  absl::Notification stop_probing_;
  std::thread prober_;
  // The replicas' connections answers are being read from: Stop cuts them,
  // so that no proxying thread waits on a replica that went silent.
  absl::Mutex upstream_mutex_;
  std::set<std::shared_ptr<httplib::Client>> upstream_;
};

// How to learn the tokens of the prompt a request is routed by: given as
// token ids (a completion's first prompt, when it is ids), or by asking a
// replica's /tokenize (`tokenize_body`: a completion's first prompt, a
// chat's messages and tools, as the server itself will tokenize them);
// neither for other routes or a body that is not JSON (the replica answers
// those).
struct PromptForRouting {
  std::vector<int> tokens;
  std::string tokenize_body;
};
PromptForRouting RoutingPrompt(const std::string& path, const std::string& body);

// Each replica's Prometheus text exposition merged: every family once, its
// samples summed over replicas (without a replica label; quantiles, which
// do not add, left out), then each replica's with replica="i" and its value
// as the replica wrote it. (Sum either the unlabelled series or those with
// a replica label, not both; a sum drops when a replica restarts.)
std::string MergeReplicaMetrics(const std::vector<std::string>& replicas);

}  // namespace llama

#endif  // LLAMA_LAUNCHER_SERVE_FRONT_END_H_
