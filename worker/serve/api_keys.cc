#include "worker/serve/api_keys.h"

#include "absl/strings/strip.h"
#include "base/net.h"
#include "worker/serve/api_response.h"

namespace llama {

std::optional<http::Response> RefuseWithoutKey(const http::Request& head, const std::vector<std::string>& keys) {
  if (keys.empty()) return std::nullopt;
  absl::string_view key = head.Header("Authorization");
  if (absl::ConsumePrefix(&key, "Bearer ")) {
    bool ok = false;
    for (const std::string& k : keys) ok |= net::ConstantTimeEquals(key, k);
    if (ok) return std::nullopt;
  }
  return ErrorResponse({401, "a valid API key is required: Authorization: Bearer <key>", "invalid_request_error", "",
                        "invalid_api_key"});
}

}  // namespace llama
