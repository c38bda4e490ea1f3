#include "worker/serve/api_response.h"

#include <chrono>
#include <utility>

#include <glog/logging.h>

#include "absl/strings/str_cat.h"

namespace llama {

http::Response JsonResponse(int status, std::string body, http::Headers headers) {
  return {status, "application/json", std::move(body), std::move(headers)};
}

http::ServerOptions ApiHttpOptions(const std::string& host, int port, const http::Limits& limits, bool access_log) {
  http::ServerOptions o;
  o.host = host;
  o.port = port;
  o.limits = limits;
  o.error_response = [](int status, const std::string& message, const std::string& code) {
    return ErrorResponse({status, message, status >= 500 ? "server_error" : "invalid_request_error", "", code});
  };
  if (access_log) {
    o.access_log = [](const http::AccessRecord& record) { LOG(INFO) << "access: " << http::AccessLogLine(record); };
  }
  return o;
}

http::Response ErrorResponse(const ApiError& error) {
  http::Headers headers;
  if (error.status == 429 || error.status == 503) headers.emplace_back("Retry-After", "1");
  return JsonResponse(error.status, error.Json(), std::move(headers));
}

void Reply(const std::shared_ptr<http::Exchange>& exchange, const ApiError& error) {
  exchange->Respond(ErrorResponse(error));
}

std::string Sse(const nlohmann::json& data) { return absl::StrCat("data: ", data.dump(), "\n\n"); }

int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace llama
