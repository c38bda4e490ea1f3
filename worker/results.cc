#include "worker/results.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/durable_file.h"

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

std::string CompletionJson(const Completion& completion, bool chat, bool logprobs) {
  nlohmann::ordered_json j;
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
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

absl::Status WriteLinesAtomically(const std::string& path, const std::vector<std::string>& lines) {
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) return absl::PermissionDeniedError(absl::StrFormat("--output \"%s\": cannot create %s", path, temp));
    for (const std::string& line : lines) out << line << "\n";
    out.flush();
    if (!out) {
      std::remove(temp.c_str());
      return absl::ResourceExhaustedError(absl::StrFormat("--output \"%s\": write failed (disk full?)", path));
    }
  }
  absl::Status s = RenameDurably(temp, path);
  if (!s.ok()) std::remove(temp.c_str());
  return s;
}

absl::StatusOr<std::unique_ptr<ResultsFile>> ResultsFile::Create(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::PermissionDeniedError(absl::StrFormat("--output \"%s\": cannot create: %s", path, std::strerror(errno)));
  }
  return std::unique_ptr<ResultsFile>(new ResultsFile(path, fd));
}

ResultsFile::~ResultsFile() { ::close(fd_); }

absl::Status ResultsFile::Append(const std::vector<std::string>& lines) {
  std::string batch;
  for (const std::string& line : lines) absl::StrAppend(&batch, line, "\n");
  size_t written = 0;
  while (written < batch.size()) {
    const ssize_t n = ::write(fd_, batch.data() + written, batch.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::ResourceExhaustedError(
          absl::StrFormat("--output \"%s\": write failed (%s); the lines before are complete", path_,
                          std::strerror(errno)));
    }
    written += n;
  }
  if (::fdatasync(fd_) != 0) {
    return absl::UnavailableError(absl::StrFormat("--output \"%s\": fdatasync: %s", path_, std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace llama
