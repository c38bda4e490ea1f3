#include "launcher/file_fetcher.h"

#include <curl/curl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/durable_file.h"
#include "base/status_macros.h"
#include "checkpoint/checklist.h"
#include "launcher/presigned_url.h"

namespace llama {

namespace fs = std::filesystem;

// The state of one transfer, seen by libcurl's callbacks.
struct Transfer {
  CURL* curl;
  FILE* file = nullptr;
  Md5* md5 = nullptr;
  uint64_t offset = 0;       // Bytes on disk before this request.
  uint64_t written = 0;      // Bytes appended by this request.
  long status = 0;
  bool checked_head = false;
  bool restarted = false;    // Server ignored Range: started over.
  bool html = false;         // Got a web page instead of the file.
  bool write_failed = false;
  std::string error_body;    // First bytes of an error response.
  std::function<void(uint64_t)> progress;
};

namespace {

constexpr char kExpired[] =
    "the presigned URL was refused (HTTP %d) for %s: it has probably expired. Meta's download links last 24 "
    "hours and allow a limited number of downloads; request a new one";

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  Transfer& t = *static_cast<Transfer*>(user);
  const size_t n = size * count;
  if (!t.checked_head) {
    t.checked_head = true;
    curl_easy_getinfo(t.curl, CURLINFO_RESPONSE_CODE, &t.status);
    if (t.status == 200 && t.offset > 0) {
      // The server ignored our Range: start the file over.
      if (ftruncate(fileno(t.file), 0) != 0 || fseek(t.file, 0, SEEK_SET) != 0) return 0;
      t.md5->Reset();
      t.offset = 0;
      t.restarted = true;
    }
    if (t.status == 200 || t.status == 206) {
      // A web page where a file should be: a wrong or expired URL.
      std::string start = absl::AsciiStrToLower(absl::string_view(data, std::min<size_t>(n, 64)));
      start = std::string(absl::StripLeadingAsciiWhitespace(start));
      if (t.offset == 0 && (absl::StartsWith(start, "<?xml") || absl::StartsWith(start, "<!doctype") ||
                            absl::StartsWith(start, "<html"))) {
        t.html = true;
        return 0;
      }
    }
  }
  if (t.status != 200 && t.status != 206) {
    if (t.error_body.size() < 512) t.error_body.append(data, std::min<size_t>(n, 512 - t.error_body.size()));
    return n;
  }
  if (fwrite(data, 1, n, t.file) != n) {
    t.write_failed = true;
    return 0;
  }
  t.md5->Update(data, n);
  t.written += n;
  if (t.progress) t.progress(n);
  return n;
}

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  // "Content-Range: bytes 0-0/12345" gives the size (HEAD is not allowed on
  // GET-signed URLs, so sizes come from a one-byte ranged GET).
  const absl::string_view line(data, size * count);
  if (absl::StartsWithIgnoreCase(line, "content-range:")) {
    const size_t slash = line.rfind('/');
    uint64_t total = 0;
    if (slash != absl::string_view::npos &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(slash + 1)), &total)) {
      *static_cast<uint64_t*>(user) = total;
    }
  }
  return size * count;
}

}  // namespace

CURLcode FileFetcher::Perform(const std::string& relative, Transfer& t, uint64_t offset) {
  const std::string url = FileUrl(options_.url_template, relative);
  char error[CURL_ERROR_SIZE] = {};
  curl_easy_reset(t.curl);
  curl_easy_setopt(t.curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(t.curl, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(t.curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(t.curl, CURLOPT_CONNECTTIMEOUT, 30L);
  curl_easy_setopt(t.curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(t.curl, CURLOPT_LOW_SPEED_TIME, static_cast<long>(options_.stall_timeout.count()));
  curl_easy_setopt(t.curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(t.curl, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(t.curl, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(t.curl, CURLOPT_BUFFERSIZE, 512L * 1024);
  if (offset > 0) curl_easy_setopt(t.curl, CURLOPT_RANGE, absl::StrCat(offset, "-").c_str());
  t.offset = offset;
  return curl_easy_perform(t.curl);
}

absl::Status FileFetcher::Classify(const std::string& relative, const Transfer& t, CURLcode code, bool* retry) {
  *retry = false;
  const std::string where = redact_(RedactUrl(FileUrl(options_.url_template, relative)));
  if (t.html) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the server sent a web page instead of %s (%s): the URL is probably wrong or expired; paste the "
        "presigned URL from Meta's e-mail exactly",
        relative, where));
  }
  if (t.write_failed) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "cannot write %s/%s.partial (disk full?); the partial file is kept, run again to resume", options_.target_dir,
        relative));
  }
  long status = t.status;
  if (status == 0) curl_easy_getinfo(t.curl, CURLINFO_RESPONSE_CODE, &status);
  if (status == 401 || status == 403 || status == 404 || status == 410) {
    return absl::PermissionDeniedError(absl::StrFormat(kExpired, status, where));
  }
  if (code == CURLE_OK && (status == 200 || status == 206)) return absl::OkStatus();
  *retry = true;
  if (code != CURLE_OK) {
    return absl::UnavailableError(redact_(absl::StrFormat("%s: %s", where, curl_easy_strerror(code))));
  }
  return absl::UnavailableError(absl::StrFormat("%s: HTTP %d", where, status));
}

absl::StatusOr<std::string> FileFetcher::FetchText(const std::string& relative, const std::string& remote) {
  const std::string path = (fs::path(options_.target_dir) / relative).string();
  FetchJob job{relative, "", 0, remote};
  uint64_t ignored = 0;
  RETURN_IF_ERROR(FetchFile(job, nullptr, &ignored));
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<uint64_t> FileFetcher::RemoteSize(const std::string& relative) {
  std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), &curl_easy_cleanup);
  uint64_t total = 0;
  std::string last;
  for (int attempt = 0; attempt < options_.max_attempts; ++attempt) {
    const std::string url = FileUrl(options_.url_template, relative);
    curl_easy_setopt(curl.get(), CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl.get(), CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl.get(), CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(curl.get(), CURLOPT_RANGE, "0-0");
    curl_easy_setopt(curl.get(), CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(curl.get(), CURLOPT_TIMEOUT, static_cast<long>(options_.stall_timeout.count()));
    curl_easy_setopt(curl.get(), CURLOPT_HEADERFUNCTION, OnHeader);
    curl_easy_setopt(curl.get(), CURLOPT_HEADERDATA, &total);
    // A server that ignores Range answers 200 with the whole file: its
    // Content-Length is the size, and the body is cut off at once.
    curl_easy_setopt(curl.get(), CURLOPT_WRITEDATA, curl.get());
    curl_easy_setopt(curl.get(), CURLOPT_WRITEFUNCTION, +[](char*, size_t size, size_t count, void* handle) -> size_t {
      long answered = 0;
      curl_easy_getinfo(static_cast<CURL*>(handle), CURLINFO_RESPONSE_CODE, &answered);
      return answered == 200 ? 0 : size * count;
    });
    const CURLcode code = curl_easy_perform(curl.get());
    long status = 0;
    curl_easy_getinfo(curl.get(), CURLINFO_RESPONSE_CODE, &status);
    const std::string where = redact_(RedactUrl(url));
    if (status == 401 || status == 403 || status == 404 || status == 410) {
      return absl::PermissionDeniedError(absl::StrFormat(kExpired, status, where));
    }
    if (code == CURLE_OK && total > 0) return total;
    if ((code == CURLE_OK || code == CURLE_WRITE_ERROR) && status == 200) {
      curl_off_t length = -1;
      curl_easy_getinfo(curl.get(), CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
      return length > 0 ? static_cast<uint64_t>(length) : 0;  // 0: the server did not say.
    }
    last = code != CURLE_OK ? redact_(absl::StrFormat("%s: %s", where, curl_easy_strerror(code)))
                            : absl::StrFormat("%s: HTTP %d", where, status);
    std::this_thread::sleep_for(std::chrono::milliseconds(200 << std::min(attempt, 5)));
  }
  return absl::UnavailableError(
      absl::StrFormat("gave up on %s after %d attempts: %s", relative, options_.max_attempts, last));
}

absl::Status FileFetcher::FetchFile(const FetchJob& job, const std::function<void(uint64_t)>& on_bytes,
                                    uint64_t* fetched) {
  const std::string final_path = (fs::path(options_.target_dir) / job.relative).string();
  const std::string partial_path = final_path + ".partial";
  std::error_code error;
  fs::create_directories(fs::path(final_path).parent_path(), error);
  std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), &curl_easy_cleanup);
  absl::Status last;
  bool mismatched_once = false;
  for (int attempt = 0; attempt < options_.max_attempts; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100 << std::min(attempt, 6)));
    // Resume: hash what is already on disk, then ask for the rest.
    Md5 md5;
    uint64_t offset = 0;
    if (FILE* existing = std::fopen(partial_path.c_str(), "rb"); existing != nullptr) {
      std::vector<char> buffer(8 << 20);
      size_t n;
      while ((n = std::fread(buffer.data(), 1, buffer.size(), existing)) > 0) {
        md5.Update(buffer.data(), n);
        offset += n;
      }
      std::fclose(existing);
    }
    if (job.size > 0 && offset >= job.size) {
      if (offset > job.size) {
        fs::remove(partial_path, error);
        md5.Reset();
        offset = 0;
      }
    }
    std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(partial_path.c_str(), "ab"), &std::fclose);
    if (file == nullptr) {
      return absl::PermissionDeniedError(absl::StrFormat("cannot write %s: %s", partial_path, std::strerror(errno)));
    }
    std::setvbuf(file.get(), nullptr, _IOFBF, 4 << 20);  // Fewer, larger writes than curl's 16 KiB chunks.
    Transfer t;
    t.curl = curl.get();
    t.file = file.get();
    t.md5 = &md5;
    t.progress = on_bytes;
    CURLcode code = CURLE_OK;
    if (!(job.size > 0 && offset == job.size)) code = Perform(job.url_path(), t, offset);
    if (job.size > 0 && offset == job.size) t.status = 206;  // Nothing left to fetch.
    std::fflush(file.get());
    fsync(fileno(file.get()));  // Durable before any rename into place.
    file.reset();
    *fetched += t.written;
    bool retry = false;
    last = Classify(job.url_path(), t, code, &retry);
    if (!last.ok()) {
      // A page instead of the file, or nothing fetched at all: no partial
      // file to resume from.
      if (t.html || (!retry && fs::file_size(partial_path, error) == 0)) fs::remove(partial_path, error);
      if (!retry) return last;
      continue;
    }
    if (!job.md5.empty()) {
      const std::string actual = md5.Hex();
      if (actual != job.md5) {
        fs::remove(partial_path, error);
        last = absl::DataLossError(absl::StrFormat("%s: MD5 %s does not match the checklist's %s", job.relative,
                                                   actual, job.md5));
        if (mismatched_once) return last;
        mismatched_once = true;  // Fetch it once more, from scratch.
        continue;
      }
    }
    return RenameDurably(partial_path, final_path);
  }
  return Annotate(last, absl::StrFormat("gave up on %s after %d attempts", job.relative, options_.max_attempts));
}

}  // namespace llama
