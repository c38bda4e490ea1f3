#include "worker/serve/run_server.h"

#include <malloc.h>
#include <signal.h>

#include <glog/logging.h>

#include "base/status_macros.h"
#include "worker/engine/engine_loop.h"
#include "worker/engine/lockstep.h"

namespace llama {
namespace {

// The next SIGTERM or SIGINT within `timeout`, or 0.
int WaitForSignal(std::chrono::milliseconds timeout) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  timespec wait{static_cast<time_t>(timeout.count() / 1000), static_cast<long>(timeout.count() % 1000) * 1000000};
  const int signal = sigtimedwait(&set, nullptr, &wait);
  return signal > 0 ? signal : 0;
}

}  // namespace

absl::Status RunServer(LanguageModel& model, Communicator& host, const Tokenizer& tokenizer,
                       const RunServerOptions& options) {
  // Request bodies and their parses run to megabytes, on several threads.
  // glibc raises its mmap threshold to the largest block freed, after which
  // such blocks come from per-thread arenas that keep them: a fixed
  // threshold returns every large request's memory when it is done.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  LeaderModel leader(&model, &host);
  Engine engine(&leader, options.engine);
  EngineLoop loop(&engine, [&leader] { return leader.Heartbeat(); }, options.heartbeat);
  ApiServer server(&loop, &tokenizer, model.limits().max_seq_len, options.api);
  if (absl::Status s = server.Start(); !s.ok()) {
    loop.Stop();
    loop.Join();
    RETURN_IF_ERROR(leader.Stop());
    return s;
  }
  server.SetReady();
  if (options.on_ready) options.on_ready(server.port());

  // Serve until told to stop or the engine fails.
  while (loop.status().ok() && WaitForSignal(std::chrono::milliseconds(200)) == 0) {
  }
  if (!loop.status().ok()) {
    server.Stop();
    return loop.status();
  }
  // Drain: no new requests; those in flight finish, or are cancelled at the
  // deadline or on a second signal.
  LOG(INFO) << "draining: up to " << options.drain_timeout.count() << " s for the requests in flight";
  server.SetDraining();
  loop.Stop();
  const auto deadline = std::chrono::steady_clock::now() + options.drain_timeout;
  while (!loop.finished() && std::chrono::steady_clock::now() < deadline) {
    if (WaitForSignal(std::chrono::milliseconds(50)) != 0) break;
  }
  if (!loop.finished()) server.CancelAll();
  loop.Join();
  server.Stop();
  RETURN_IF_ERROR(loop.status());
  return leader.Stop();
}

}  // namespace llama
