// The OpenAI API's answers in HTTP's terms: a JSON body, an error (with
// Retry-After where retrying helps), a Server-Sent Event, and the clock
// that dates responses (their "created").

#ifndef LLAMA_WORKER_SERVE_API_RESPONSE_H_
#define LLAMA_WORKER_SERVE_API_RESPONSE_H_

#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "worker/http/http_server.h"
#include "worker/serve/openai_api.h"

namespace llama {

http::Response JsonResponse(int status, std::string body, http::Headers headers = {});
// An HTTP server's options as every server of the API sets them: errors it
// gives itself (a limit, no route) in the API's error form, and with
// `access_log` a glog INFO line per request (http::AccessLogLine).
http::ServerOptions ApiHttpOptions(const std::string& host, int port, const http::Limits& limits, bool access_log);
// The error object with its status; 429 and 503 say Retry-After: 1.
http::Response ErrorResponse(const ApiError& error);
// Answers `exchange` with ErrorResponse(error).
void Reply(const std::shared_ptr<http::Exchange>& exchange, const ApiError& error);
// One Server-Sent Event: "data: <json>\n\n".
std::string Sse(const nlohmann::json& data);
// Seconds since the Unix epoch, for "created".
int64_t UnixSeconds();

}  // namespace llama

#endif  // LLAMA_WORKER_SERVE_API_RESPONSE_H_
