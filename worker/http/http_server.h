// An event-driven HTTP/1.1 server on Boost.Beast and Asio: a few I/O threads
// hold any number of connections, and a streamed answer is a queue of
// asynchronous writes, never a blocked thread.
//
// Why Beast: it is Boost's (Debian's libboost1.81-dev, header-only), it
// parses incrementally with limits on the header block and the body (chunked
// or not) applied while reading, and its async model lets the engine's
// thread feed a stream without a thread per client. libevent's evhttp
// (Triton's choice) buffers a whole chunked body before its size check.
//
// What a connection may cost is bounded and each bound names its flag in
// the error: the header block's bytes and field count (431), the body (413),
// a deadline from a request's first byte to its last (408), an idle time
// between keep-alive requests, the number of open connections (503 at
// once past it), and the bytes queued for a client that does not read.
// Pipelined requests are answered in order; TCP_NODELAY is set; the port is
// bound without SO_REUSEPORT, so a second server on it fails to start.

#ifndef LLAMA_WORKER_HTTP_HTTP_SERVER_H_
#define LLAMA_WORKER_HTTP_HTTP_SERVER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace llama::http {

struct Limits {
  int max_connections = 4096;
  size_t max_header_bytes = size_t{64} << 10;
  int max_headers = 100;
  size_t max_body_bytes = size_t{8} << 20;
  absl::Duration request_timeout = absl::Seconds(30);  // First byte of a request to its last.
  absl::Duration keep_alive_timeout = absl::Seconds(60);  // Idle between requests; a stalled write.
  size_t max_queued_bytes = size_t{16} << 20;  // Answer bytes waiting for a client that does not read.
};

// The flag that sets each limit, for the errors that name it.
struct LimitNames {
  std::string max_connections = "--max_connections";
  std::string max_header_bytes = "--max_header_bytes";
  std::string max_headers = "--max_headers";
  std::string max_body_bytes = "--max_body_bytes";
  std::string request_timeout = "--request_timeout";
};

using Headers = std::vector<std::pair<std::string, std::string>>;

struct Request {
  std::string method;
  std::string target;  // As sent: path and query.
  std::string path;    // The target without its query.
  int version = 11;    // 10 or 11.
  Headers headers;
  std::string body;  // Empty until the body is read.

  // The first header of that name (case-insensitive), or "".
  absl::string_view Header(absl::string_view name) const;
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  Headers headers;
};

class Connection;

// One request's answer. Any thread may answer, once: Respond, or
// StartStream, then Send any number of times, then End. Calls after the
// client went away are ignored.
class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(std::weak_ptr<Connection> connection, Request request);
  const Request& request() const { return request_; }

  void Respond(Response response);
  // The head of a streamed answer (chunked for HTTP/1.1; for HTTP/1.0 the
  // body runs to the connection's close).
  void StartStream(int status, std::string content_type, Headers headers = {});
  void Send(std::string data);
  void End();

  // `on_gone` runs once, on an I/O thread, if the client goes away (or the
  // connection is cut: a stalled write, too many queued bytes, Stop) before
  // the answer ends. It may run at once; it does not run if the answer was
  // given in full first.
  void OnClientGone(std::function<void()> on_gone);
  bool client_gone() const { return gone_.load(); }

 private:
  friend class Connection;
  void Gone();

  std::weak_ptr<Connection> connection_;
  Request request_;
  std::atomic<bool> gone_{false};
  std::atomic<bool> answered_{false};
  std::function<void()> on_gone_;  // Touched on the connection's strand only.
};

struct Route {
  std::string method;
  std::string path;
  // After the head, before the body: an answer here (a missing API key) is
  // sent without reading the body.
  std::function<std::optional<Response>(const Request& head)> check_head;
  std::function<void(std::shared_ptr<Exchange>)> handler;
  // true: runs on the I/O thread, which it must not hold (health, metrics);
  // false: on the server's worker threads (parsing, tokenizing).
  bool on_io_thread = false;
};

// One request as the access log records it: who asked, what, and how it
// ended; never a header's or the body's contents (prompts, keys).
struct AccessRecord {
  std::string remote;  // "address:port" ("[v6]:port"), or "-".
  std::string method;  // "-" when the head could not be read.
  std::string path;    // Without the query.
  int version = 11;
  int status = 0;  // 0: closed before any answer.
  size_t body_bytes = 0;  // Of the answer, as written (chunk framing not counted).
  absl::Duration duration;  // From the request's first byte to its answer's last, or the close.
  bool complete = true;  // false: the connection closed before the answer ended.
};

// `127.0.0.1:5000 "POST /v1/completions HTTP/1.1" 200 512 B 85.2 ms`, with
// "(closed before the answer ended)" when not complete.
std::string AccessLogLine(const AccessRecord& record);

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port.
  int io_threads = 2;
  int worker_threads = 2;
  Limits limits;
  LimitNames limit_names;
  // The body of an error the server itself gives (a limit, a bad request,
  // no route): status, message, a short code.
  std::function<Response(int status, const std::string& message, const std::string& code)> error_response;
  // Called on an I/O thread once per request when its exchange ends; unset:
  // no access log.
  std::function<void(const AccessRecord&)> access_log;
};

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();  // Stops.
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Before Start.
  void Handle(Route route);
  // Binds (a busy port is an error naming it) and serves on threads of its own.
  absl::Status Start();
  int port() const;
  // Closes the listener and every connection, then joins the threads.
  void Stop();

  // Runs `task` on the worker threads.
  void Post(std::function<void()> task);
  int open_connections() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace llama::http

#endif  // LLAMA_WORKER_HTTP_HTTP_SERVER_H_
