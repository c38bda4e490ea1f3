#include "worker/serving_flags.h"

#include <cstdlib>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/durable_file.h"
#include "base/status_macros.h"

namespace llama {

absl::StatusOr<ServingHttpOptions> ServingHttpOptionsFromFlags(const JobFlags& flags) {
  ServingHttpOptions o;
  o.limits.max_connections = flags.max_connections;
  o.limits.max_header_bytes = flags.max_header_bytes;
  o.limits.max_headers = flags.max_headers;
  o.limits.max_body_bytes = flags.max_body_bytes;
  o.limits.request_timeout = absl::Seconds(flags.request_timeout);
  o.limits.keep_alive_timeout = absl::Seconds(flags.keep_alive_timeout);
  o.access_log = flags.access_log;
  const char* variable = std::getenv(kApiKeyVariable);
  for (const std::string& key : {flags.api_key, std::string(variable != nullptr ? variable : "")}) {
    if (!key.empty()) o.api_keys.push_back(key);
  }
  if (!flags.api_key_file.empty()) {
    ASSIGN_OR_RETURN(const std::string text, ReadFileToString(flags.api_key_file));
    for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
      o.api_keys.push_back(std::string(absl::StripAsciiWhitespace(line)));
    }
    if (o.api_keys.empty()) {
      return absl::InvalidArgumentError(absl::StrFormat("--api_key_file=%s holds no key", flags.api_key_file));
    }
  }
  return o;
}

}  // namespace llama
