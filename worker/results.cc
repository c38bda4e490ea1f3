#include "worker/results.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "base/durable_file.h"
#include "base/status_macros.h"

namespace llama {
namespace {

constexpr char kRule[] = "\n==================================\n\n";

std::string Capitalized(absl::string_view role) {
  std::string s(role);
  if (!s.empty()) s[0] = absl::ascii_toupper(s[0]);
  return s;
}

}  // namespace

std::string FormatTextCompletion(const std::string& prompt, const Completion& completion) {
  return absl::StrCat(prompt, "\n> ", completion.generation, "\n", kRule);
}

std::string FormatChatCompletion(const Dialog& dialog, const Completion& completion) {
  std::string out;
  for (const Message& message : dialog) absl::StrAppend(&out, Capitalized(RoleName(message.role)), ": ", message.content, "\n\n");
  absl::StrAppend(&out, "> Assistant: ", completion.generation, "\n", kRule);
  return out;
}

namespace {

// The reference's fields of a completion, appended to `j` in its order.
void AddCompletionFields(const Completion& completion, bool chat, bool logprobs, nlohmann::ordered_json& j) {
  if (chat) {
    j["generation"] = {{"role", "assistant"}, {"content", completion.generation}};
  } else {
    j["generation"] = completion.generation;
  }
  j["token_ids"] = completion.token_ids;
  if (logprobs) {
    j["tokens"] = completion.tokens;
    j["logprobs"] = completion.logprobs;
  }
}

std::string Dump(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

std::string CompletionJson(const Completion& completion, bool chat, bool logprobs) {
  nlohmann::ordered_json j;
  AddCompletionFields(completion, chat, logprobs, j);
  return Dump(j);
}

namespace {

// All of `bytes` written to `fd` and on the disk (fdatasync) before this
// returns; the errors name --output.
absl::Status WriteAndSync(int fd, const std::string& bytes, const std::string& path) {
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "--output=%s: write failed (%s); the lines before are complete", path, std::strerror(errno)));
    }
    written += n;
  }
  if (::fdatasync(fd) != 0) {
    return absl::UnavailableError(absl::StrFormat("--output=%s: fdatasync: %s", path, std::strerror(errno)));
  }
  return absl::OkStatus();
}

std::string Joined(const std::vector<std::string>& lines) {
  std::string bytes;
  for (const std::string& line : lines) absl::StrAppend(&bytes, line, "\n");
  return bytes;
}

// --output must be a file if it is there at all: a folder or a device
// there is refused before any work, not found when the first answer is due.
absl::Status CheckOutputIsAFile(const std::string& path) {
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(path, error);
  if (!std::filesystem::exists(status) || std::filesystem::is_regular_file(status)) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrFormat("--output=%s is not a file (a folder?): expected a JSON Lines file to write or resume", path));
}

}  // namespace

std::string ResultLine(size_t index, const JobIdentity& job, const Completion& completion, bool chat, bool logprobs) {
  nlohmann::ordered_json j;
  j["index"] = index;
  if (completion.status.ok()) {
    AddCompletionFields(completion, chat, logprobs, j);
  } else {
    j["error"] = std::string(completion.status.message());
  }
  j["job"] = job.fields();
  return Dump(j);
}

absl::StatusOr<PreviousResults> ResumeResults(const std::string& path, const JobIdentity& job, size_t total) {
  PreviousResults previous;
  RETURN_IF_ERROR(CheckOutputIsAFile(path));
  if (!std::filesystem::exists(path)) return previous;
  // A file there that cannot be read is refused, never taken for none and
  // overwritten.
  absl::StatusOr<std::string> read = ReadFileToString(path);
  if (!read.ok()) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "--output=%s cannot be read to resume it or tell whose answers it holds (%s); --overwrite_output replaces it",
        path, read.status().message()));
  }
  const std::string& text = *read;
  // `what` the file holds instead of this job's answers.
  const auto refuse = [&](absl::string_view what) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "--output=%s %s. It is neither resumed nor overwritten: --overwrite_output starts it afresh (replaced "
        "once the new job has its first answer), or choose another --output (a rerun of the same job resumes it)",
        path, what));
  };
  const auto not_results = [&](size_t line_number, absl::string_view why) {
    return refuse(absl::StrFormat("is not a batch job's output: line %d %s", line_number, why));
  };
  size_t start = 0;
  for (size_t line_number = 1; start < text.size(); ++line_number) {
    const size_t end = text.find('\n', start);
    if (end == std::string::npos) break;  // Cut short: that prompt runs again.
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (absl::StripAsciiWhitespace(line).empty()) continue;  // A blank line an editor left.
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return not_results(line_number, "is not a JSON object");
    const auto recorded = j.find("job");
    if (recorded == j.end()) return not_results(line_number, "names no job");
    const absl::StatusOr<JobIdentity> theirs = JobIdentity::FromJson(*recorded);
    if (!theirs.ok()) return not_results(line_number, theirs.status().message());
    if (const std::string difference = job.FirstDifference(*theirs); !difference.empty()) {
      return refuse(absl::StrFormat("holds answers of another job: %s (line %d)", difference, line_number));
    }
    const auto index = j.find("index");
    if (index == j.end() || !index->is_number_unsigned() || index->get<size_t>() >= total) {
      return refuse(absl::StrFormat("holds answers of another job: line %d has no index of this job (0 to %d)",
                                    line_number, static_cast<int64_t>(total) - 1));
    }
    if (j.contains("error") || !previous.done.insert(index->get<size_t>()).second) continue;
    previous.lines.push_back(line);
  }
  return previous;
}

absl::Status WriteLinesAtomically(const std::string& path, const std::vector<std::string>& lines) {
  const std::string temp = path + ".tmp";
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::PermissionDeniedError(
        absl::StrFormat("--output=%s: cannot create %s: %s", path, temp, std::strerror(errno)));
  }
  // Synced before the rename: the rename must never make a file that a
  // crash leaves shorter than the one it replaced.
  absl::Status s = WriteAndSync(fd, Joined(lines), path);
  ::close(fd);
  if (s.ok()) s = RenameDurably(temp, path);
  if (!s.ok()) std::remove(temp.c_str());
  return s;
}

absl::StatusOr<std::unique_ptr<ResultsFile>> ResultsFile::Create(const std::string& path,
                                                                 const std::vector<std::string>& kept) {
  RETURN_IF_ERROR(CheckOutputIsAFile(path));
  std::string partial;
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_APPEND;
  if (kept.empty()) {
    partial = path + ".partial";
    flags |= O_TRUNC;
  } else {
    RETURN_IF_ERROR(WriteLinesAtomically(path, kept));
  }
  const std::string& opened = partial.empty() ? path : partial;
  const int fd = ::open(opened.c_str(), flags, 0644);
  if (fd < 0) {
    return absl::PermissionDeniedError(
        absl::StrFormat("--output=%s: cannot create %s: %s", path, opened, std::strerror(errno)));
  }
  return std::unique_ptr<ResultsFile>(new ResultsFile(path, std::move(partial), fd));
}

ResultsFile::~ResultsFile() {
  ::close(fd_);
  if (!partial_.empty()) ::unlink(partial_.c_str());
}

absl::Status ResultsFile::Append(const std::vector<std::string>& lines) {
  RETURN_IF_ERROR(WriteAndSync(fd_, Joined(lines), path_));
  if (!partial_.empty()) {
    RETURN_IF_ERROR(RenameDurably(partial_, path_));
    partial_.clear();
  }
  return absl::OkStatus();
}

}  // namespace llama
