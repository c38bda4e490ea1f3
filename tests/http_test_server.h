// A small HTTP/1.1 file server for the download tests and benchmark: serves
// a folder under a fake presigned path (GET only, Range supported, one
// request per connection) and injects the faults real CDNs produce.

#ifndef LLAMA_TESTS_HTTP_TEST_SERVER_H_
#define LLAMA_TESTS_HTTP_TEST_SERVER_H_

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/dist/net.h"

namespace llama::testing {

// Faults for one file; each "once" fault fires on the first request only.
struct Fault {
  int drop_after_bytes_once = -1;      // Close the connection mid-body.
  std::vector<int> statuses_first;     // Answer these statuses (in order) before serving.
  int always_status = 0;               // E.g. 403 on every request.
  int64_t corrupt_offset_once = -1;    // Flip one byte of the body (first time).
  int stall_ms = 0;                    // Sleep before sending the body.
  bool ignore_range = false;           // Answer 200 with the whole file to Range requests.
  bool html_instead = false;           // 200 with an HTML error page.
  int64_t bytes_per_second = 0;        // Pace the body like a link of this speed (0: as fast as possible).
};

class HttpTestServer {
 public:
  // Serves files of `root` at http://127.0.0.1:<port>/<prefix>/<relative path>
  // to requests whose query is exactly `query` (else 403, as an expired
  // presigned URL gets).
  static absl::StatusOr<std::unique_ptr<HttpTestServer>> Start(std::string root, std::string prefix,
                                                               std::string query);
  ~HttpTestServer();

  int port() const { return port_; }
  // "http://127.0.0.1:<port>/<prefix>/*?<query>": the template download.sh takes.
  std::string UrlTemplate() const;
  void SetFault(const std::string& relative_path, Fault fault);
  // Body bytes sent for a file so far (to check resumption).
  int64_t BytesServed(const std::string& relative_path);
  int Requests(const std::string& relative_path);

 private:
  HttpTestServer(net::Socket listener, int port, std::string root, std::string prefix, std::string query);
  void Serve(net::Socket client);

  net::Socket listener_;
  int port_;
  std::string root_, prefix_, query_;
  std::mutex mutex_;
  std::map<std::string, Fault> faults_;
  std::map<std::string, int64_t> served_;
  std::map<std::string, int> requests_;
  std::atomic<bool> stopping_{false};
  std::thread accept_thread_;
  std::vector<std::thread> threads_;
};

}  // namespace llama::testing

#endif  // LLAMA_TESTS_HTTP_TEST_SERVER_H_
