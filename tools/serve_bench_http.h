// //tools:serve_bench --url: the load sent to a running server (launcher
// serve) through its streamed completions, each request on a connection of
// its own, with bystanders beside it: idle and slow-header connections and
// a /health probe, whose latencies are the point of them.

#ifndef LLAMA_TOOLS_SERVE_BENCH_HTTP_H_
#define LLAMA_TOOLS_SERVE_BENCH_HTTP_H_

#include <string>

#include "absl/status/status.h"
#include "tools/serve_load.h"

namespace llama {

// Filled from serve_bench's flags, which hold the defaults.
struct HttpLoadOptions {
  std::string url;    // http://host:port
  std::string model;  // Empty: the server's (GET /v1/models).
  int health_probe_ms = 0;   // 0: no probe.
  int idle_connections = 0;  // Held open, never sending a byte.
  int slow_connections = 0;  // Held open, sending one header byte every 3 s.
  int server_pid = 0;        // The server's process, whose resident memory is reported; 0: none.
};

// Sends the load, then prints the report.
absl::Status RunHttpLoad(const LoadShape& load, const HttpLoadOptions& options);

}  // namespace llama

#endif  // LLAMA_TOOLS_SERVE_BENCH_HTTP_H_
