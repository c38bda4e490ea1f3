// Meta's presigned download URL: a template whose "*" stands for each
// file's path, and whose policy and signature must never be shown.

#ifndef LLAMA_LAUNCHER_PRESIGNED_URL_H_
#define LLAMA_LAUNCHER_PRESIGNED_URL_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace llama {

// `url` with everything from '?' on replaced by "?<redacted>".
std::string RedactUrl(absl::string_view url);

// Makes any message safe to show for a presigned URL template: the text
// after its "*" (the policy and signature, whichever way the URL is laid
// out) and any query before the "*" are replaced by "<redacted>" wherever
// they appear, so a file's URL (the "*" replaced by its path) shows only up
// to the path. Messages about the template itself use Template().
class UrlRedactor {
 public:
  explicit UrlRedactor(absl::string_view url_template);
  std::string operator()(absl::string_view message) const;
  // The template as it may be shown: up to and including the "*" (or the
  // first '?'), then "<redacted>".
  const std::string& Template() const { return shown_template_; }

 private:
  std::vector<std::string> secrets_;  // Longest first.
  std::string shown_template_;
};

// `url_template` has the shape of the one in Meta's e-mail: http(s), a "*"
// and a query string; errors show it through `redact`.
absl::Status CheckUrlTemplate(const std::string& url_template, const UrlRedactor& redact);

// The URL template with "*" replaced by `relative`.
std::string FileUrl(absl::string_view url_template, absl::string_view relative);

}  // namespace llama

#endif  // LLAMA_LAUNCHER_PRESIGNED_URL_H_
