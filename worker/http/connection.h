// One HTTP/1.1 connection of the server (http_server.h): a request's head
// and body read under the limits, dispatched to its route, its answer
// written (whole, or as a stream of chunks) in order, keep-alive, and the
// lingering close after an error. Private to //worker/http:http_server.

#ifndef LLAMA_WORKER_HTTP_CONNECTION_H_
#define LLAMA_WORKER_HTTP_CONNECTION_H_

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio.hpp>

#include "worker/http/http_server.h"

namespace llama::http {

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
  std::unique_ptr<boost::asio::thread_pool> pool;  // Runs the routes that are not on_io_thread.
};

// An accepted client on `socket`; StartConnection serves it, on a strand of
// its own, until either side closes.
std::shared_ptr<Connection> NewConnection(ConnectionContext* context, boost::asio::ip::tcp::socket socket);
void StartConnection(const std::shared_ptr<Connection>& connection);
// Closes it from its strand (the server's Stop).
void CloseConnection(const std::shared_ptr<Connection>& connection);
// A client not taken in: `response`, with Retry-After: 1, then the close.
void RefuseConnection(boost::asio::ip::tcp::socket socket, Response response);

}  // namespace llama::http

#endif  // LLAMA_WORKER_HTTP_CONNECTION_H_
