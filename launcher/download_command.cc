#include "launcher/download_command.h"

#include <termios.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/progress.h"
#include "base/status_macros.h"
#include "launcher/download.h"

DEFINE_string(models, "",
              "download: models to fetch, comma-separated: 7B,13B,70B,7B-chat,13B-chat,70B-chat (Llama 2) or "
              "Llama-3-8B,Llama-3-8B-Instruct,Llama-3-70B,Llama-3-70B-Instruct (Llama 3) or llama-stack's ids for "
              "Llama 3.1+ (Llama3.1-8B-Instruct, Llama3.2-1B, Llama3.3-70B-Instruct, Llama3.1-405B:bf16-mp8, ...); "
              "one family per URL.");
DEFINE_string(target_dir, "", "download: folder to download into (download.sh's TARGET_FOLDER).");
DEFINE_string(url, "", "download: the presigned URL from Meta's e-mail. Safer: $PRESIGNED_URL, --url_file, or the prompt.");
DEFINE_string(url_file, "", "download: file holding the presigned URL.");
DEFINE_int32(connections, 4, "download: files fetched at once.");

namespace llama {
namespace {

// The presigned URL: --url, --url_file, $PRESIGNED_URL, or typed at the
// terminal without echo (never put on a command line we run).
absl::StatusOr<std::string> PresignedUrl() {
  if (!FLAGS_url.empty()) return FLAGS_url;
  if (!FLAGS_url_file.empty()) {
    std::ifstream in(FLAGS_url_file);
    std::string url;
    std::getline(in, url);
    url = std::string(absl::StripAsciiWhitespace(url));
    if (url.empty()) return absl::InvalidArgumentError(absl::StrFormat("--url_file \"%s\": empty or unreadable", FLAGS_url_file));
    return url;
  }
  if (const char* url = std::getenv("PRESIGNED_URL"); url != nullptr && *url != '\0') return std::string(url);
  FILE* tty = std::fopen("/dev/tty", "r+");
  if (tty == nullptr) {
    return absl::InvalidArgumentError("no presigned URL: pass --url, --url_file or set PRESIGNED_URL");
  }
  std::fprintf(tty, "Enter the URL from Meta's e-mail (not shown): ");
  std::fflush(tty);
  termios saved;
  const bool terminal = tcgetattr(fileno(tty), &saved) == 0;
  if (terminal) {
    termios quiet = saved;
    quiet.c_lflag &= ~ECHO;
    tcsetattr(fileno(tty), TCSANOW, &quiet);
  }
  char line[8192] = {};
  const bool read = std::fgets(line, sizeof line, tty) != nullptr;
  if (terminal) tcsetattr(fileno(tty), TCSANOW, &saved);
  std::fprintf(tty, "\n");
  std::fclose(tty);
  const std::string url(absl::StripAsciiWhitespace(line));
  if (!read || url.empty()) return absl::InvalidArgumentError("no presigned URL entered");
  return url;
}

}  // namespace

absl::Status RunDownloadCommand() {
  if (FLAGS_target_dir.empty()) return absl::InvalidArgumentError("download: --target_dir is required");
  ASSIGN_OR_RETURN(const std::string url, PresignedUrl());
  DownloadOptions options;
  options.url_template = url;
  options.models = absl::StrSplit(FLAGS_models, ',', absl::SkipEmpty());
  options.target_dir = FLAGS_target_dir;
  options.connections = FLAGS_connections;
  options.show_progress = true;
  absl::StatusOr<DownloadReport> report = DownloadMetaCheckpoints(options);
  if (!report.ok()) return Annotate(report.status(), "download");
  std::printf("downloaded %zu file(s) (%s), %zu already complete, into %s; every file matches its checklist\n",
              report->fetched.size(), HumanBytes(report->bytes_fetched).c_str(), report->skipped.size(),
              FLAGS_target_dir.c_str());
  return absl::OkStatus();
}

}  // namespace llama
