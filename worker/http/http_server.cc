#include "worker/http/http_server.h"

#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <sstream>
#include <thread>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <glog/logging.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"

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

}  // namespace

absl::string_view Request::Header(absl::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (absl::EqualsIgnoreCase(key, name)) return value;
  }
  return {};
}

struct Server::Impl {
  explicit Impl(ServerOptions o) : options(std::move(o)) {}

  void Accept();
  void RefuseAtCapacity(tcp::socket socket);
  const Route* Find(const std::string& method, const std::string& path) const;
  Response Error(int status, const std::string& message, const std::string& code) const {
    return options.error_response ? options.error_response(status, message, code)
                                  : Response{status, "text/plain", message + "\n", {}};
  }

  ServerOptions options;
  std::vector<Route> routes;
  std::atomic<int> open{0};
  std::atomic<bool> stopping{false};
  std::atomic<int> running_threads{0};
  int max_connections = 0;
  int port = 0;
  absl::Mutex mutex;
  std::vector<std::weak_ptr<Connection>> connections ABSL_GUARDED_BY(mutex);
  std::unique_ptr<asio::thread_pool> pool;
  std::vector<std::thread> threads;
  // Last, so that it goes first: handlers it still holds may hold
  // connections, which use the members above.
  asio::io_context io;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  // On a strand: Stop closes it while an accept handler may run.
  tcp::acceptor acceptor{asio::make_strand(io)};
  asio::steady_timer accept_retry{acceptor.get_executor()};
};

// One client connection; every member is touched on its strand only.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  // The read buffer holds the head and the body's bytes not parsed yet: at
  // most a head and a read. It needs a bound of its own because Beast's
  // parser sets none on a chunk-size line or the trailer.
  Connection(Server::Impl* server, tcp::socket socket)
      : server_(server),
        socket_(std::move(socket)),
        timer_(socket_.get_executor()),
        buffer_(server->options.limits.max_header_bytes + 2 * kReadChunk) {}

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
    if (exchange_ != nullptr) std::exchange(exchange_, nullptr)->Gone();
    busy_self_.reset();
  }

  // The answer paths, from the Exchange (posted onto the strand).
  void Respond(const Exchange* exchange, Response response) {
    if (closed_ || exchange_.get() != exchange) return;
    bhttp::response<bhttp::string_body> message(static_cast<bhttp::status>(response.status), version_);
    for (auto& [name, value] : response.headers) message.set(name, value);
    message.set(bhttp::field::content_type, response.content_type);
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
    Arm(Clock::now() + ToChrono(limits.request_timeout), Wait::kRequest);
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
    exchange_ = std::make_shared<Exchange>(weak_from_this(), std::move(head_));
    Respond(exchange_.get(), std::move(response));
  }

  void Dispatch() {
    Disarm();
    keep_alive_ = parser_->get().keep_alive();
    parser_.reset();
    auto exchange = std::make_shared<Exchange>(weak_from_this(), std::move(head_));
    exchange_ = exchange;
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

  void AfterAnswer() {
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

  Server::Impl* server_;
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

// ---- Server

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

Server::~Server() { Stop(); }

void Server::Handle(Route route) { impl_->routes.push_back(std::move(route)); }

int Server::port() const { return impl_->port; }

int Server::open_connections() const { return impl_->open.load(); }

void Server::Post(std::function<void()> task) {
  if (impl_->pool != nullptr) asio::post(*impl_->pool, std::move(task));
}

const Route* Server::Impl::Find(const std::string& method, const std::string& path) const {
  for (const Route& route : routes) {
    if (route.method == method && route.path == path) return &route;
  }
  return nullptr;
}

void Server::Impl::RefuseAtCapacity(tcp::socket socket) {
  Response response = Error(503,
                            absl::StrFormat("the server holds %d connections, its limit (%s); retry later",
                                            max_connections, options.limit_names.max_connections),
                            "too_many_connections");
  bhttp::response<bhttp::string_body> message(bhttp::status::service_unavailable, 11);
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

void Server::Impl::Accept() {
  acceptor.async_accept(asio::make_strand(io), [this](beast::error_code ec, tcp::socket socket) {
    if (stopping) return;
    if (ec) {
      if (ec == asio::error::operation_aborted) return;
      // Out of descriptors, say: wait rather than spin.
      LOG_EVERY_N(WARNING, 100) << "http: accept failed: " << ec.message();
      accept_retry.expires_after(std::chrono::milliseconds(50));
      accept_retry.async_wait([this](beast::error_code e) {
        if (!e) Accept();
      });
      return;
    }
    if (open.load() >= max_connections) {
      RefuseAtCapacity(std::move(socket));
    } else {
      socket.set_option(tcp::no_delay(true), ec);
      auto connection = std::make_shared<Connection>(this, std::move(socket));
      {
        absl::MutexLock lock(&mutex);
        if (connections.size() > 64 && connections.size() > 2 * static_cast<size_t>(open.load())) {
          connections.erase(std::remove_if(connections.begin(), connections.end(),
                                           [](const std::weak_ptr<Connection>& c) { return c.expired(); }),
                            connections.end());
        }
        connections.push_back(connection);
      }
      connection->Start();
    }
    Accept();
  });
}

absl::Status Server::Start() {
  Impl& s = *impl_;
  const ServerOptions& o = s.options;
  // Each connection is a descriptor: as many as the hard limit allows.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
  s.max_connections = o.limits.max_connections;
  constexpr int kReservedFiles = 256;  // Model files, ranks' sockets, logs.
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY &&
      static_cast<rlim_t>(s.max_connections) + kReservedFiles > files.rlim_cur) {
    s.max_connections = std::max<int>(1, static_cast<int>(files.rlim_cur) - kReservedFiles);
    LOG(WARNING) << o.limit_names.max_connections << "=" << o.limits.max_connections << " is more than this process's "
                 << files.rlim_cur << " open files allow; holding at most " << s.max_connections
                 << " (raise ulimit -n)";
  }

  beast::error_code ec;
  tcp::resolver resolver(s.io);
  const auto endpoints = resolver.resolve(o.host, std::to_string(o.port), tcp::resolver::passive, ec);
  const std::string where = absl::StrFormat("%s:%d", o.host, o.port);
  if (ec || endpoints.empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("cannot listen on %s: --host does not resolve (%s)", where, ec.message()));
  }
  const tcp::endpoint endpoint = *endpoints.begin();
  s.acceptor.open(endpoint.protocol(), ec);
  // SO_REUSEADDR lets a restarted server bind past old TIME_WAIT
  // connections; without SO_REUSEPORT a second listener on the port fails.
  if (!ec) s.acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(endpoint, ec);
  if (!ec) s.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(absl::StrFormat(
        "cannot listen on %s: %s (in use, or not an address of this host): pick another --port or --host", where,
        ec.message()));
  }
  s.port = s.acceptor.local_endpoint().port();
  s.pool = std::make_unique<asio::thread_pool>(std::max(1, o.worker_threads));
  s.work.emplace(s.io.get_executor());
  s.Accept();
  for (int i = 0; i < std::max(1, o.io_threads); ++i) {
    s.running_threads.fetch_add(1);
    s.threads.emplace_back([&s] {
      s.io.run();
      s.running_threads.fetch_sub(1);
    });
  }
  return absl::OkStatus();
}

void Server::Stop() {
  Impl& s = *impl_;
  if (s.threads.empty() || s.stopping.exchange(true)) return;
  asio::post(s.acceptor.get_executor(), [&s] {
    beast::error_code ignored;
    s.acceptor.close(ignored);
    s.accept_retry.cancel();
  });
  {
    absl::MutexLock lock(&s.mutex);
    for (const std::weak_ptr<Connection>& weak : s.connections) {
      if (std::shared_ptr<Connection> c = weak.lock()) asio::post(c->executor(), [c] { c->Close(); });
    }
  }
  s.pool->stop();
  s.pool->join();
  s.work.reset();
  // With every socket closed the threads run out of work; a handler that
  // still waits (a refused client's write) is cut after a grace period.
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  while (s.running_threads.load() > 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  s.io.stop();
  for (std::thread& t : s.threads) t.join();
  s.threads.clear();
}

}  // namespace llama::http
