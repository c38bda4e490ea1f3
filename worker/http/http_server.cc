#include "worker/http/http_server.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <glog/logging.h>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "worker/http/connection.h"

namespace llama::http {

absl::string_view Request::Header(absl::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (absl::EqualsIgnoreCase(key, name)) return value;
  }
  return {};
}

std::string AccessLogLine(const AccessRecord& r) {
  // Escaped: a hostile client's path must not forge lines or quotes.
  return absl::StrFormat("%s \"%s %s HTTP/1.%d\" %d %d B %.1f ms%s", r.remote, absl::CHexEscape(r.method),
                         absl::CHexEscape(r.path), r.version == 10 ? 0 : 1, r.status, r.body_bytes,
                         absl::ToDoubleMilliseconds(r.duration), r.complete ? "" : " (closed before the answer ended)");
}

// The listener: it accepts, or refuses past the limit, and tracks its
// connections for Stop.
struct Server::Impl : ConnectionContext {
  explicit Impl(ServerOptions o) : ConnectionContext(std::move(o)) {}

  void Accept();
  void RefuseAtCapacity(tcp::socket socket);

  std::atomic<bool> stopping{false};
  std::atomic<int> running_threads{0};
  int max_connections = 0;
  int port = 0;
  absl::Mutex mutex;
  std::vector<std::weak_ptr<Connection>> connections ABSL_GUARDED_BY(mutex);
  std::vector<std::thread> threads;
  // Last, so that it goes first: handlers it still holds may hold
  // connections, which use the members above.
  asio::io_context io;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  // On a strand: Stop closes it while an accept handler may run.
  tcp::acceptor acceptor{asio::make_strand(io)};
  asio::steady_timer accept_retry{acceptor.get_executor()};
};

// ---- Server

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

Server::~Server() { Stop(); }

void Server::Handle(Route route) { impl_->routes.push_back(std::move(route)); }

int Server::port() const { return impl_->port; }

int Server::open_connections() const { return impl_->open.load(); }

void Server::Post(std::function<void()> task) {
  if (impl_->pool != nullptr) asio::post(*impl_->pool, std::move(task));
}

void Server::Impl::RefuseAtCapacity(tcp::socket socket) {
  RefuseConnection(std::move(socket),
                   Error(503,
                         absl::StrFormat("the server holds %d connections, its limit (%s); retry later",
                                         max_connections, options.limit_names.max_connections),
                         "too_many_connections"));
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
      std::shared_ptr<Connection> connection = NewConnection(this, std::move(socket));
      {
        absl::MutexLock lock(&mutex);
        if (connections.size() > 64 && connections.size() > 2 * static_cast<size_t>(open.load())) {
          connections.erase(std::remove_if(connections.begin(), connections.end(),
                                           [](const std::weak_ptr<Connection>& c) { return c.expired(); }),
                            connections.end());
        }
        connections.push_back(connection);
      }
      StartConnection(connection);
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
      if (std::shared_ptr<Connection> c = weak.lock()) CloseConnection(c);
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
