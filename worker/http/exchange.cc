// The route's handle on a request: its answer calls are posted onto the
// connection's strand, and the first answer wins.

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include <boost/asio.hpp>

#include "worker/http/connection.h"
#include "worker/http/http_server.h"

namespace llama::http {

Exchange::Exchange(std::weak_ptr<Connection> connection, Request request)
    : connection_(std::move(connection)), request_(std::move(request)) {}

void Exchange::Gone() {
  gone_ = true;
  if (on_gone_) std::exchange(on_gone_, nullptr)();
}

void Exchange::Respond(Response response) {
  if (answered_.exchange(true)) return;
  if (std::shared_ptr<Connection> c = connection_.lock()) {
    asio::post(c->executor(), [c, self = shared_from_this(), r = std::move(response)]() mutable {
      c->Respond(self.get(), std::move(r));
    });
  }
}

void Exchange::StartStream(int status, std::string content_type, Headers headers) {
  if (answered_.exchange(true)) return;
  if (std::shared_ptr<Connection> c = connection_.lock()) {
    asio::post(c->executor(),
               [c, self = shared_from_this(), status, t = std::move(content_type), h = std::move(headers)] {
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

}  // namespace llama::http
