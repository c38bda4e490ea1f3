#include "worker/http/connection.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <sstream>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <glog/logging.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace llama::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

Clock::duration ToChrono(absl::Duration d) { return absl::ToChronoNanoseconds(d); }

// The bytes of a response head (and body, if any), as Beast formats them.
template <class Body>
std::string Serialize(const bhttp::message<false, Body>& message) {
  std::ostringstream out;
  out << message;
  return out.str();
}

constexpr size_t kReadChunk = 16 << 10;
// After an error answer to a request whose body was not read, the rest of
// it is read and dropped for a while before closing: closing with unread
// bytes sends a reset, which can destroy the answer before the client
// reads it (nginx's lingering close).
constexpr auto kLingerTime = std::chrono::seconds(2);
constexpr size_t kLingerBytes = size_t{4} << 20;

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

// One client connection; every member is touched on its strand only.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  // The read buffer holds the head and the body's bytes not parsed yet: at
  // most a head and a read. It needs a bound of its own because Beast's
  // parser sets none on a chunk-size line or the trailer.
  Connection(ConnectionContext* server, tcp::socket socket)
      : server_(server),
        socket_(std::move(socket)),
        timer_(socket_.get_executor()),
        buffer_(server->options.limits.max_header_bytes + 2 * kReadChunk),
        remote_(RemoteName(socket_)) {}

  asio::any_io_executor executor() { return socket_.get_executor(); }

  void Start() {
    server_->open.fetch_add(1);
    asio::dispatch(executor(), [self = shared_from_this()] { self->WaitForRequest(); });
  }

  void Close() {
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

  // The answer paths, from the Exchange (posted onto the strand).
  void Respond(const Exchange* exchange, Response response) {
    if (closed_ || exchange_.get() != exchange) return;
    bhttp::response<bhttp::string_body> message(static_cast<bhttp::status>(response.status), version_);
    for (auto& [name, value] : response.headers) message.set(name, value);
    message.set(bhttp::field::content_type, response.content_type);
    status_ = response.status;
    body_bytes_ = response.body.size();
    message.body() = std::move(response.body);
    message.keep_alive(keep_alive_);
    message.prepare_payload();
    Enqueue(Serialize(message));
    answer_complete_ = true;
    Flush();
  }

  void StartStream(const Exchange* exchange, int status, const std::string& content_type, const Headers& headers) {
    if (closed_ || exchange_.get() != exchange) return;
    bhttp::response<bhttp::empty_body> head(static_cast<bhttp::status>(status), version_);
    status_ = status;
    for (const auto& [name, value] : headers) head.set(name, value);
    head.set(bhttp::field::content_type, content_type);
    // HTTP/1.0 has no chunks: the body ends with the connection.
    chunked_ = version_ >= 11;
    if (chunked_) {
      head.chunked(true);
    } else {
      keep_alive_ = false;
    }
    head.keep_alive(keep_alive_);
    std::ostringstream header;
    header << head.base();  // The head only: the whole message would end the chunked body at once.
    Enqueue(header.str());
    Flush();
  }

  void Send(const Exchange* exchange, const std::string& data) {
    if (closed_ || exchange_.get() != exchange || data.empty()) return;
    body_bytes_ += data.size();
    if (chunked_) {
      Enqueue(absl::StrFormat("%x\r\n", data.size()));
      Enqueue(data);
      Enqueue("\r\n");
    } else {
      Enqueue(data);
    }
    if (outbox_.size() > server_->options.limits.max_queued_bytes) {
      LOG_EVERY_N(WARNING, 100) << "http: a client read too slowly (over "
                                << server_->options.limits.max_queued_bytes << " bytes queued); closed";
      return Close();
    }
    Flush();
  }

  void End(const Exchange* exchange) {
    if (closed_ || exchange_.get() != exchange) return;
    if (chunked_) Enqueue("0\r\n\r\n");
    answer_complete_ = true;
    Flush();
  }

  void SetOnGone(Exchange* exchange, std::function<void()> on_gone) {
    if (exchange->client_gone()) {
      on_gone();
    } else if (!closed_ && exchange_.get() == exchange) {
      exchange->on_gone_ = std::move(on_gone);
    }  // Else answered in full already: the client did not go early.
  }

 private:
  enum class Wait { kIdle, kRequest, kWrite, kLinger };

  // Cuts the connection's socket operations at `deadline`; what follows
  // depends on what was awaited.
  void Arm(Clock::time_point deadline, Wait what) {
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
  void Disarm() {
    ++timer_generation_;
    timer_.cancel();
  }

  void WaitForRequest() {
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

  void ReadHead() {
    const Limits& limits = server_->options.limits;
    // The request's deadline runs from its first byte, which is here.
    request_started_ = Clock::now();
    head_ = Request{};
    Arm(request_started_ + ToChrono(limits.request_timeout), Wait::kRequest);
    timed_out_ = false;
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(std::min<size_t>(limits.max_header_bytes, UINT32_MAX)));
    parser_->body_limit(limits.max_body_bytes);
    bhttp::async_read_header(socket_, buffer_, *parser_,
                             [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHead(ec); });
  }

  void OnHead(beast::error_code ec) {
    if (closed_) return;
    if (ec) return OnReadError(ec);
    const ServerOptions& options = server_->options;
    const auto& message = parser_->get();
    const auto fields = std::distance(message.begin(), message.end());
    if (fields > options.limits.max_headers) {
      return Refuse(431,
                    absl::StrFormat("the request has %d header fields, more than %d (%s)", fields,
                                    options.limits.max_headers, options.limit_names.max_headers),
                    "header_fields_too_many");
    }
    version_ = message.version() == 10 ? 10 : 11;
    head_ = Request{};
    head_.method = std::string(message.method_string());
    head_.target = std::string(message.target());
    head_.path = head_.target.substr(0, head_.target.find('?'));
    head_.version = version_;
    for (const auto& field : message) head_.headers.emplace_back(field.name_string(), field.value());
    route_ = server_->Find(head_.method, head_.path);
    if (route_ == nullptr) {
      return Refuse(404, absl::StrFormat("no route for %s %s", head_.method, head_.path), "not_found");
    }
    if (route_->check_head) {
      if (std::optional<Response> refusal = route_->check_head(head_)) return Refuse(*std::move(refusal));
    }
    if (parser_->is_done()) return Dispatch();
    if (version_ >= 11 && absl::EqualsIgnoreCase(head_.Header("Expect"), "100-continue")) {
      static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
      return asio::async_write(socket_, asio::buffer(kContinue, sizeof kContinue - 1),
                               [self = shared_from_this()](beast::error_code ec, size_t) {
                                 if (ec) return self->Close();
                                 self->ReadBody();
                               });
    }
    ReadBody();
  }

  void ReadBody() {
    if (closed_) return;
    bhttp::async_read(socket_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (self->closed_) return;
      if (ec) return self->OnReadError(ec);
      self->head_.body = std::move(self->parser_->get().body());
      self->Dispatch();
    });
  }

  void OnReadError(beast::error_code ec) {
    const ServerOptions& options = server_->options;
    if (timed_out_) {
      return Refuse(408,
                    absl::StrFormat("the request did not arrive within %s (%s)",
                                    absl::FormatDuration(options.limits.request_timeout),
                                    options.limit_names.request_timeout),
                    "request_timeout");
    }
    if (ec == bhttp::error::header_limit || ec == bhttp::error::buffer_overflow) {
      return Refuse(431,
                    absl::StrFormat("the request's header block is larger than %d bytes (%s)",
                                    options.limits.max_header_bytes, options.limit_names.max_header_bytes),
                    "header_too_large");
    }
    if (ec == bhttp::error::body_limit) {
      return Refuse(413,
                    absl::StrFormat("the body is larger than %d bytes (%s)", options.limits.max_body_bytes,
                                    options.limit_names.max_body_bytes),
                    "payload_too_large");
    }
    // The client closed, or reset, between or inside requests.
    if (ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message || ec == asio::error::eof ||
        ec == asio::error::connection_reset || ec == asio::error::operation_aborted) {
      return Close();
    }
    Refuse(400, absl::StrFormat("bad request: %s", ec.message()), "bad_request");
  }

  // An answer to a request that is not dispatched; the connection is kept
  // only if the request was read whole.
  void Refuse(int status, const std::string& message, const std::string& code) {
    Refuse(server_->Error(status, message, code));
  }
  void Refuse(Response response) {
    Disarm();
    const bool read_whole = parser_.has_value() && parser_->is_done() && !timed_out_;
    keep_alive_ = read_whole && parser_->get().keep_alive();
    parser_.reset();
    NewExchange();
    Respond(exchange_.get(), std::move(response));
  }

  void Dispatch() {
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
  void WatchForDisconnect() {
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

  void Enqueue(const std::string& bytes) { outbox_ += bytes; }

  void Flush() {
    if (closed_ || writing_) return;
    if (outbox_.empty()) {
      if (answer_complete_) AfterAnswer();
      return;
    }
    writing_ = true;
    in_flight_.swap(outbox_);
    outbox_.clear();
    // A client that stops reading is cut off after the idle time.
    Arm(Clock::now() + ToChrono(server_->options.limits.keep_alive_timeout), Wait::kWrite);
    asio::async_write(socket_, asio::buffer(in_flight_), [self = shared_from_this()](beast::error_code ec, size_t) {
      self->writing_ = false;
      self->in_flight_.clear();
      if (ec) return self->Close();
      self->Disarm();
      self->Flush();
    });
  }

  void NewExchange() {
    exchange_ = std::make_shared<Exchange>(weak_from_this(), std::move(head_));
    status_ = 0;
    body_bytes_ = 0;
  }

  void LogAccess(bool complete) {
    if (!server_->options.access_log) return;
    const Request& request = exchange_->request();
    server_->options.access_log({remote_, request.method.empty() ? "-" : request.method,
                                 request.path.empty() ? "-" : request.path, request.version, status_, body_bytes_,
                                 absl::FromChrono(Clock::now() - request_started_), complete});
  }

  void AfterAnswer() {
    LogAccess(/*complete=*/true);
    exchange_.reset();
    answer_complete_ = false;
    chunked_ = false;
    std::shared_ptr<Connection> self = std::move(busy_self_);  // Alive to the end of this call.
    if (!keep_alive_) return Linger();
    WaitForRequest();
  }

  void Linger() {
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    Arm(Clock::now() + kLingerTime, Wait::kLinger);
    LingerRead();
  }
  void LingerRead() {
    buffer_.clear();
    socket_.async_read_some(buffer_.prepare(kReadChunk), [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->lingered_ += n;
      if (ec || self->lingered_ > kLingerBytes) return self->Close();
      self->LingerRead();
    });
  }

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

// ---- Exchange

Exchange::Exchange(std::weak_ptr<Connection> connection, Request request)
    : connection_(std::move(connection)), request_(std::move(request)) {}

void Exchange::Gone() {
  gone_ = true;
  if (on_gone_) std::exchange(on_gone_, nullptr)();
}

void Exchange::Respond(Response response) {
  if (answered_.exchange(true)) return;
  if (std::shared_ptr<Connection> c = connection_.lock()) {
    asio::post(c->executor(), [c, self = shared_from_this(), r = std::move(response)]() mutable { c->Respond(self.get(), std::move(r)); });
  }
}

void Exchange::StartStream(int status, std::string content_type, Headers headers) {
  if (answered_.exchange(true)) return;
  if (std::shared_ptr<Connection> c = connection_.lock()) {
    asio::post(c->executor(), [c, self = shared_from_this(), status, t = std::move(content_type), h = std::move(headers)] {
      c->StartStream(self.get(), status, t, h);
    });
  }
}

void Exchange::Send(std::string data) {
  if (std::shared_ptr<Connection> c = connection_.lock()) {
    asio::post(c->executor(), [c, self = shared_from_this(), d = std::move(data)] { c->Send(self.get(), d); });
  }
}

void Exchange::End() {
  if (std::shared_ptr<Connection> c = connection_.lock()) {
    asio::post(c->executor(), [c, self = shared_from_this()] { c->End(self.get()); });
  }
}

void Exchange::OnClientGone(std::function<void()> on_gone) {
  std::shared_ptr<Connection> c = connection_.lock();
  if (c == nullptr) {
    if (client_gone()) on_gone();
    return;
  }
  asio::post(c->executor(), [c, self = shared_from_this(), f = std::move(on_gone)]() mutable {
    c->SetOnGone(self.get(), std::move(f));
  });
}

// ---- Starting and ending

std::shared_ptr<Connection> NewConnection(ConnectionContext* context, tcp::socket socket) {
  return std::make_shared<Connection>(context, std::move(socket));
}

void StartConnection(const std::shared_ptr<Connection>& connection) { connection->Start(); }

void CloseConnection(const std::shared_ptr<Connection>& connection) {
  asio::post(connection->executor(), [c = connection] { c->Close(); });
}

void RefuseConnection(tcp::socket socket, Response response) {
  bhttp::response<bhttp::string_body> message(static_cast<bhttp::status>(response.status), 11);
  message.set(bhttp::field::content_type, response.content_type);
  message.set(bhttp::field::retry_after, "1");
  message.keep_alive(false);
  message.body() = std::move(response.body);
  message.prepare_payload();
  auto state = std::make_shared<std::pair<tcp::socket, std::string>>(std::move(socket), Serialize(message));
  asio::async_write(state->first, asio::buffer(state->second), [state](beast::error_code, size_t) {
    beast::error_code ignored;
    state->first.shutdown(tcp::socket::shutdown_both, ignored);
    state->first.close(ignored);
  });
}

}  // namespace llama::http
