// Writing an answer: whole, or a head and then chunks (HTTP/1.1) or bytes
// up to the close (HTTP/1.0), queued in order and written one write at a
// time; a client that reads too slowly is cut off.

#include <memory>
#include <sstream>
#include <string>
#include <utility>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <glog/logging.h>

#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "worker/http/connection.h"

namespace llama::http {

namespace {

// The bytes of a response head (and body, if any), as Beast formats them.
template <class Body>
std::string Serialize(const bhttp::message<false, Body>& message) {
  std::ostringstream out;
  out << message;
  return out.str();
}

}  // namespace

void Connection::Respond(const Exchange* exchange, Response response) {
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

void Connection::StartStream(const Exchange* exchange, int status, const std::string& content_type,
                             const Headers& headers) {
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

void Connection::Send(const Exchange* exchange, const std::string& data) {
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

void Connection::End(const Exchange* exchange) {
  if (closed_ || exchange_.get() != exchange) return;
  if (chunked_) Enqueue("0\r\n\r\n");
  answer_complete_ = true;
  Flush();
}

void Connection::SetOnGone(Exchange* exchange, std::function<void()> on_gone) {
  if (exchange->client_gone()) {
    on_gone();
  } else if (!closed_ && exchange_.get() == exchange) {
    exchange->on_gone_ = std::move(on_gone);
  }  // Else answered in full already: the client did not go early.
}

void Connection::Enqueue(const std::string& bytes) { outbox_ += bytes; }

void Connection::Flush() {
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
