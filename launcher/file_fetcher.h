// One file of a presigned-URL tree fetched to its place under the target
// directory: resumed from its ".partial" file, retried on what can pass
// (timeouts, 5xx, stalls), MD5-checked against its checklist, renamed into
// place durably; and the small requests beside (a text file, a size).
// libcurl does the transfers. Private to //launcher:download.

#ifndef LLAMA_LAUNCHER_FILE_FETCHER_H_
#define LLAMA_LAUNCHER_FILE_FETCHER_H_

#include <curl/curl.h>

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "launcher/download.h"
#include "launcher/presigned_url.h"

namespace llama {

// One file to fetch.
struct FetchJob {
  std::string relative;  // Path under target_dir (and under the URL's "*" unless `remote` says otherwise).
  std::string md5;       // Expected, from a checklist; empty: not checked.
  uint64_t size = 0;     // From the server, when asked.
  std::string remote;    // Path under the URL's "*" where it differs (Llama 3's "8b_pre_trained/...").
  const std::string& url_path() const { return remote.empty() ? relative : remote; }
};

struct Transfer;

class FileFetcher {
 public:
  explicit FileFetcher(const DownloadOptions& options) : options_(options), redact_(options.url_template) {}

  // Fetches a small file into memory (checklists, params): retried like the
  // rest. `remote`: its path under the URL's "*" when not `relative`.
  absl::StatusOr<std::string> FetchText(const std::string& relative, const std::string& remote = "");
  // The file's size from the server.
  absl::StatusOr<uint64_t> RemoteSize(const std::string& relative);
  // Downloads a job to its final place (resume, retries, MD5). `on_bytes`
  // (may be empty) hears of every chunk written.
  absl::Status FetchFile(const FetchJob& job, const std::function<void(uint64_t)>& on_bytes, uint64_t* fetched);

  const UrlRedactor& redact() const { return redact_; }

 private:
  // One attempt: appends to `file`; returns curl's code and fills `t`.
  CURLcode Perform(const std::string& relative, Transfer& t, uint64_t offset);
  absl::Status Classify(const std::string& relative, const Transfer& t, CURLcode code, bool* retry);

  const DownloadOptions& options_;
  UrlRedactor redact_;
};

}  // namespace llama

#endif  // LLAMA_LAUNCHER_FILE_FETCHER_H_
