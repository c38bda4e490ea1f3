// What a server's HTTP side takes from the job's flags: the limits on a
// connection, the access log and the API keys. Rank 0's server and the
// replicas' front end (launcher serve --data_parallel_size) read them alike.

#ifndef LLAMA_WORKER_SERVING_FLAGS_H_
#define LLAMA_WORKER_SERVING_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/http/http_server.h"
#include "worker/job_flags.h"

namespace llama {

struct ServingHttpOptions {
  http::Limits limits;
  bool access_log = false;
  std::vector<std::string> api_keys;  // Empty: no key needed.
};

// Keys from --api_key, $LLAMA_API_KEY and --api_key_file (one per line; a
// file without one is an error naming it).
absl::StatusOr<ServingHttpOptions> ServingHttpOptionsFromFlags(const JobFlags& flags);

}  // namespace llama

#endif  // LLAMA_WORKER_SERVING_FLAGS_H_
