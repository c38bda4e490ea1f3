// The API key check every server of the API applies to a request's head:
// rank 0's (worker/serve/api_server.h) and the replicas' front end
// (launcher/serve_front_end.h), so both refuse alike.

#ifndef LLAMA_WORKER_SERVE_API_KEYS_H_
#define LLAMA_WORKER_SERVE_API_KEYS_H_

#include <optional>
#include <string>
#include <vector>

#include "worker/http/http_server.h"

namespace llama {

// The 401 for a request whose "Authorization: Bearer <key>" is missing or
// none of `keys` (compared in constant time); nothing when `keys` is empty.
std::optional<http::Response> RefuseWithoutKey(const http::Request& head, const std::vector<std::string>& keys);

}  // namespace llama

#endif  // LLAMA_WORKER_SERVE_API_KEYS_H_
