// One HTTP/1.1 connection of the server (http_server.h): a request's head
// and body read under the limits (request_reading.cc), dispatched to its
// route, its answer written whole or as a stream of chunks, in order
// (answer_writing.cc), keep-alive, and the lingering close after an error
// (connection.cc); the route's handle on it is an Exchange (exchange.cc).
// Private to //worker/http:http_server.

#ifndef LLAMA_WORKER_HTTP_CONNECTION_H_
#define LLAMA_WORKER_HTTP_CONNECTION_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "absl/time/time.h"

#include "worker/http/http_server.h"

namespace llama::http {

// The names the server's files write Boost by (this header is private to
// //worker/http:http_server).
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

// What a server's connections share with it.
struct ConnectionContext {
  explicit ConnectionContext(ServerOptions o) : options(std::move(o)) {}

  const Route* Find(const std::string& method, const std::string& path) const;
  // The body of an error the server itself gives.
  Response Error(int status, const std::string& message, const std::string& code) const {
    return options.error_response ? options.error_response(status, message, code)
                                  : Response{status, "text/plain", message + "\n", {}};
  }

  ServerOptions options;
  std::vector<Route> routes;
  std::atomic<int> open{0};  // Connections open now.
  std::unique_ptr<asio::thread_pool> pool;  // Runs the routes that are not on_io_thread.
};

// One client connection; every member is touched on its strand only.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(ConnectionContext* server, tcp::socket socket);

  asio::any_io_executor executor() { return socket_.get_executor(); }
  void Start();
  void Close();

  // The answer paths, from the Exchange (posted onto the strand).
  void Respond(const Exchange* exchange, Response response);
  void StartStream(const Exchange* exchange, int status, const std::string& content_type, const Headers& headers);
  void Send(const Exchange* exchange, const std::string& data);
  void End(const Exchange* exchange);
  void SetOnGone(Exchange* exchange, std::function<void()> on_gone);

 private:
  enum class Wait { kIdle, kRequest, kWrite, kLinger };

  static constexpr size_t kReadChunk = 16 << 10;
  // After an error answer to a request whose body was not read, the rest
  // of it is read and dropped for a while before closing: closing with
  // unread bytes sends a reset, which can destroy the answer before the
  // client reads it (nginx's lingering close).
  static constexpr auto kLingerTime = std::chrono::seconds(2);
  static constexpr size_t kLingerBytes = size_t{4} << 20;

  // connection.cc: waiting, dispatching, the end of an answer, closing.
  void Arm(Clock::time_point deadline, Wait what);
  void Disarm();
  void WaitForRequest();
  void Dispatch();
  void WatchForDisconnect();
  void NewExchange();
  void LogAccess(bool complete);
  void AfterAnswer();
  void Linger();
  void LingerRead();

  // request_reading.cc.
  void ReadHead();
  void OnHead(beast::error_code ec);
  void ReadBody();
  void OnReadError(beast::error_code ec);
  void Refuse(int status, const std::string& message, const std::string& code);
  void Refuse(Response response);

  // answer_writing.cc.
  void Enqueue(const std::string& bytes);
  void Flush();

  ConnectionContext* server_;
  tcp::socket socket_;
  asio::steady_timer timer_;
  uint64_t timer_generation_ = 0;
  bool timed_out_ = false;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  Request head_;
  const Route* route_ = nullptr;
  int version_ = 11;
  bool keep_alive_ = false;
  bool chunked_ = false;
  bool answer_complete_ = false;
  std::string outbox_, in_flight_;
  bool writing_ = false;
  size_t lingered_ = 0;
  bool closed_ = false;
  std::shared_ptr<Exchange> exchange_;
  std::shared_ptr<Connection> busy_self_;
  // For the access log.
  const std::string remote_;
  Clock::time_point request_started_;
  int status_ = 0;
  size_t body_bytes_ = 0;
};

inline Clock::duration ToChrono(absl::Duration d) { return absl::ToChronoNanoseconds(d); }

// An accepted client on `socket`; StartConnection serves it, on a strand of
// its own, until either side closes.
std::shared_ptr<Connection> NewConnection(ConnectionContext* context, tcp::socket socket);
void StartConnection(const std::shared_ptr<Connection>& connection);
// Closes it from its strand (the server's Stop).
void CloseConnection(const std::shared_ptr<Connection>& connection);
// A client not taken in: `response`, with Retry-After: 1, then the close.
void RefuseConnection(tcp::socket socket, Response response);

}  // namespace llama::http

#endif  // LLAMA_WORKER_HTTP_CONNECTION_H_
