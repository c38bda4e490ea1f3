#include "launcher/presigned_url.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace llama {

UrlRedactor::UrlRedactor(absl::string_view url_template) {
  const size_t star = url_template.find('*'), query = url_template.find('?');
  if (star != absl::string_view::npos && star + 1 < url_template.size()) {
    secrets_.emplace_back(url_template.substr(star + 1));
  }
  if (query != absl::string_view::npos && query + 1 < url_template.size()) {
    // The query up to the "*" when it comes first ("...?sig=x*" puts the
    // file's path inside the query), else the whole query.
    const size_t end = star != absl::string_view::npos && star > query ? star : url_template.size();
    if (end > query + 1) secrets_.emplace_back(url_template.substr(query + 1, end - query - 1));
  }
  std::sort(secrets_.begin(), secrets_.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  const size_t cut = std::min(star == absl::string_view::npos ? url_template.size() : star + 1,
                              query == absl::string_view::npos ? url_template.size() : query + 1);
  shown_template_ = absl::StrCat(url_template.substr(0, cut), cut < url_template.size() ? "<redacted>" : "");
}

std::string UrlRedactor::operator()(absl::string_view message) const {
  std::string safe(message);
  for (const std::string& secret : secrets_) safe = absl::StrReplaceAll(safe, {{secret, "<redacted>"}});
  return safe;
}

std::string RedactUrl(absl::string_view url) {
  const size_t q = url.find('?');
  if (q == absl::string_view::npos) return std::string(url);
  return absl::StrCat(url.substr(0, q), "?<redacted>");
}

std::string FileUrl(absl::string_view url_template, absl::string_view relative) {
  const size_t star = url_template.find('*');
  if (star == absl::string_view::npos) return std::string(url_template);
  return absl::StrCat(url_template.substr(0, star), relative, url_template.substr(star + 1));
}

// The URL has the shape of the one in Meta's e-mail.
absl::Status CheckUrlTemplate(const std::string& url_template, const UrlRedactor& redact) {
  if (url_template.find('*') == std::string::npos || !absl::StartsWith(url_template, "http")) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the presigned URL %s does not look like the one in Meta's e-mail (https://...*...?...)", redact.Template()));
  }
  if (url_template.find('?') == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the presigned URL %s has no query string (\"?Policy=...&Signature=...\"); paste the whole URL from "
        "Meta's e-mail, quoted so the shell keeps its \"&\"s",
        redact.Template()));
  }
  return absl::OkStatus();
}

}  // namespace llama
