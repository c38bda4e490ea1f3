// Fetching Meta's checkpoints with the presigned URL from Meta's e-mail, as
// download.sh does (same files, same layout), but resumable, parallel,
// checked while downloading, and careful with the URL:
//
// - the URL's "*" is replaced by each file's path ("llama-2-7b/params.json";
//   for Llama 3, download.sh of meta-llama/llama3: "8b_pre_trained/params.json"
//   saved as Meta-Llama-3-8B/params.json; for Llama 3.1 and later, as
//   llama-stack's `llama model download --source meta` does:
//   "Llama-3.1-8B-Instruct/params.json");
// - LICENSE and USE_POLICY.md (Llama 3: USE_POLICY; llama-stack: neither)
//   first, then the checklists (a malformed one is an error), then
//   tokenizer.model (Llama 3.x: one per model folder) and every model's
//   files;
// - each file downloads to "<file>.partial", resumes from the bytes on disk
//   (Range), retries with backoff on connection loss, stalls and 5xx, and
//   is renamed into place only once its MD5 (computed while downloading)
//   matches the checklist; a finished file whose MD5 matches is skipped;
// - 403/404 stop at once: the URL has probably expired (Meta's links last
//   24 hours and a limited number of downloads);
// - an HTML or XML page served with status 200 (a wrong URL pasted) is
//   recognised before anything is hashed;
// - free space is checked before starting;
// - the URL's secret never appears in any message: everything after the "*"
//   (and any query before it) is shown as "<redacted>", whatever the URL's
//   shape; a URL without a query string is refused (Meta's always has one).

#ifndef LLAMA_LAUNCHER_DOWNLOAD_H_
#define LLAMA_LAUNCHER_DOWNLOAD_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "launcher/meta_models.h"
#include "launcher/presigned_url.h"

namespace llama {


struct DownloadOptions {
  std::string url_template;         // Presigned URL with "*".
  std::vector<std::string> models;  // "7B", "13B-chat", ...
  std::string target_dir;
  int connections = 4;              // Files downloaded at once.
  int max_attempts = 6;             // Per file, for retryable failures.
  std::chrono::seconds stall_timeout{60};  // No byte for this long: retry.
  bool show_progress = false;
};

struct DownloadReport {
  std::vector<std::string> fetched;   // Relative paths downloaded now.
  std::vector<std::string> skipped;   // Already present with a matching MD5.
  uint64_t bytes_fetched = 0;
};

absl::StatusOr<DownloadReport> DownloadMetaCheckpoints(const DownloadOptions& options);

}  // namespace llama

#endif  // LLAMA_LAUNCHER_DOWNLOAD_H_
