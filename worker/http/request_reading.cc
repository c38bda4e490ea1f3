// Reading a request: its head and body under the server's limits, and the
// answers to those that break one (408, 413, 431, 400, 404), after which
// the connection is kept only if the request was read whole.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "worker/http/connection.h"

namespace llama::http {

void Connection::ReadHead() {
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

void Connection::OnHead(beast::error_code ec) {
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

void Connection::ReadBody() {
  if (closed_) return;
  bhttp::async_read(socket_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
    if (self->closed_) return;
    if (ec) return self->OnReadError(ec);
    self->head_.body = std::move(self->parser_->get().body());
    self->Dispatch();
  });
}

void Connection::OnReadError(beast::error_code ec) {
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
void Connection::Refuse(int status, const std::string& message, const std::string& code) {
  Refuse(server_->Error(status, message, code));
}

void Connection::Refuse(Response response) {
  Disarm();
  const bool read_whole = parser_.has_value() && parser_->is_done() && !timed_out_;
  keep_alive_ = read_whole && parser_->get().keep_alive();
  parser_.reset();
  NewExchange();
  Respond(exchange_.get(), std::move(response));
}

}  // namespace llama::http
