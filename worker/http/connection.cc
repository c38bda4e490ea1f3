#include "worker/http/connection.h"

#include <sys/socket.h>

#include <cerrno>
#include <memory>
#include <string>
#include <utility>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace llama::http {

namespace {

std::string RemoteName(const tcp::socket& socket) {
  beast::error_code ec;
  const tcp::endpoint peer = socket.remote_endpoint(ec);
  const bool v6 = peer.address().is_v6();
  return ec ? "-" : absl::StrCat(v6 ? "[" : "", peer.address().to_string(), v6 ? "]:" : ":", peer.port());
}

}  // namespace

const Route* ConnectionContext::Find(const std::string& method, const std::string& path) const {
  for (const Route& route : routes) {
    if (route.method == method && route.path == path) return &route;
  }
  return nullptr;
}

// The read buffer holds the head and the body's bytes not parsed yet: at
// most a head and a read. It needs a bound of its own because Beast's
// parser sets none on a chunk-size line or the trailer.
Connection::Connection(ConnectionContext* server, tcp::socket socket)
    : server_(server),
      socket_(std::move(socket)),
      timer_(socket_.get_executor()),
      buffer_(server->options.limits.max_header_bytes + 2 * kReadChunk),
      remote_(RemoteName(socket_)) {}

void Connection::Start() {
  server_->open.fetch_add(1);
  asio::dispatch(executor(), [self = shared_from_this()] { self->WaitForRequest(); });
}

void Connection::Close() {
  if (closed_) return;
  closed_ = true;
  server_->open.fetch_sub(1);
  Disarm();
  beast::error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  if (exchange_ != nullptr) {
    LogAccess(/*complete=*/false);
    std::exchange(exchange_, nullptr)->Gone();
  }
  busy_self_.reset();
}

// Cuts the connection's socket operations at `deadline`; what follows
// depends on what was awaited.
void Connection::Arm(Clock::time_point deadline, Wait what) {
  const uint64_t generation = ++timer_generation_;
  timer_.expires_at(deadline);
  timer_.async_wait([self = shared_from_this(), generation, what](beast::error_code ec) {
    if (ec || generation != self->timer_generation_ || self->closed_) return;
    if (what == Wait::kRequest) {
      self->timed_out_ = true;
      beast::error_code ignored;
      self->socket_.cancel(ignored);  // The read ends with operation_aborted; OnRead answers 408.
    } else {
      self->Close();
    }
  });
}

void Connection::Disarm() {
  ++timer_generation_;
  timer_.cancel();
}

void Connection::WaitForRequest() {
  if (closed_) return;
  if (buffer_.size() > 0) return ReadHead();
  Arm(Clock::now() + ToChrono(server_->options.limits.keep_alive_timeout), Wait::kIdle);
  socket_.async_read_some(buffer_.prepare(kReadChunk),
                          [self = shared_from_this()](beast::error_code ec, size_t n) {
                            if (ec || self->closed_) return self->Close();
                            self->buffer_.commit(n);
                            self->ReadHead();
                          });
}

void Connection::Dispatch() {
  Disarm();
  keep_alive_ = parser_->get().keep_alive();
  parser_.reset();
  NewExchange();
  std::shared_ptr<Exchange> exchange = exchange_;
  busy_self_ = shared_from_this();  // Until answered: a worker thread may hold only the Exchange.
  WatchForDisconnect();
  if (route_->on_io_thread) {
    route_->handler(std::move(exchange));
  } else {
    asio::post(*server_->pool, [handler = route_->handler, exchange] { handler(exchange); });
  }
}

// While a request is answered, the client's close is noticed (and its
// request cancelled) from the socket turning readable with nothing to
// read. Bytes instead are a pipelined request, read after this answer.
void Connection::WatchForDisconnect() {
  if (buffer_.size() > 0 || closed_) return;
  socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this(), exchange = exchange_.get()](
                                                 beast::error_code ec) {
    if (ec || self->closed_ || self->exchange_.get() != exchange) return;
    char byte;
    const ssize_t n = ::recv(self->socket_.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return self->Close();
    if (n < 0) self->WatchForDisconnect();
  });
}

void Connection::NewExchange() {
  exchange_ = std::make_shared<Exchange>(weak_from_this(), std::move(head_));
  status_ = 0;
  body_bytes_ = 0;
}

void Connection::LogAccess(bool complete) {
  if (!server_->options.access_log) return;
  const Request& request = exchange_->request();
  server_->options.access_log({remote_, request.method.empty() ? "-" : request.method,
                               request.path.empty() ? "-" : request.path, request.version, status_, body_bytes_,
                               absl::FromChrono(Clock::now() - request_started_), complete});
}

void Connection::AfterAnswer() {
  LogAccess(/*complete=*/true);
  exchange_.reset();
  answer_complete_ = false;
  chunked_ = false;
  std::shared_ptr<Connection> self = std::move(busy_self_);  // Alive to the end of this call.
  if (!keep_alive_) return Linger();
  WaitForRequest();
}

void Connection::Linger() {
  beast::error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_send, ignored);
  Arm(Clock::now() + kLingerTime, Wait::kLinger);
  LingerRead();
}

void Connection::LingerRead() {
  buffer_.clear();
  socket_.async_read_some(buffer_.prepare(kReadChunk), [self = shared_from_this()](beast::error_code ec, size_t n) {
    self->lingered_ += n;
    if (ec || self->lingered_ > kLingerBytes) return self->Close();
    self->LingerRead();
  });
}

std::shared_ptr<Connection> NewConnection(ConnectionContext* context, tcp::socket socket) {
  return std::make_shared<Connection>(context, std::move(socket));
}

void StartConnection(const std::shared_ptr<Connection>& connection) { connection->Start(); }

void CloseConnection(const std::shared_ptr<Connection>& connection) {
  asio::post(connection->executor(), [c = connection] { c->Close(); });
}

}  // namespace llama::http
