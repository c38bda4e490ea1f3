#include "checkpoint/checklist.h"

#include <openssl/evp.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/durable_file.h"
#include "base/progress.h"
#include "base/status_macros.h"

namespace llama {

absl::StatusOr<std::vector<ChecklistEntry>> ParseChecklist(absl::string_view text,
                                                           absl::string_view source) {
  std::vector<ChecklistEntry> entries;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripTrailingAsciiWhitespace(line);
    if (line.empty()) continue;
    bool hex = line.size() > 34;
    for (size_t i = 0; hex && i < 32; ++i) hex = absl::ascii_isxdigit(line[i]);
    if (!hex || line[32] != ' ' || (line[33] != ' ' && line[33] != '*')) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s:%d: expected \"<32 hex digits>  <file name>\" (md5sum format), got \"%s\"", source,
          line_number, line));
    }
    entries.push_back({absl::AsciiStrToLower(line.substr(0, 32)), std::string(line.substr(34))});
  }
  if (entries.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: no entries", source));
  }
  return entries;
}

struct Md5::Context {
  EVP_MD_CTX* evp = EVP_MD_CTX_new();
};

Md5::Md5() : context_(new Context) { Reset(); }
Md5::~Md5() {
  EVP_MD_CTX_free(context_->evp);
  delete context_;
}
void Md5::Reset() { EVP_DigestInit_ex(context_->evp, EVP_md5(), nullptr); }
void Md5::Update(const void* data, size_t size) { EVP_DigestUpdate(context_->evp, data, size); }
std::string Md5::Hex() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(context_->evp, digest, &length);
  Reset();
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) hex += absl::StrFormat("%02x", digest[i]);
  return hex;
}

absl::StatusOr<std::string> Md5File(const std::string& path, ProgressBar* progress) {
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (file == nullptr) {
    return absl::NotFoundError(absl::StrFormat("\"%s\": %s", path, std::strerror(errno)));
  }
  Md5 md5;
  std::vector<unsigned char> block(8 << 20);
  size_t n;
  while ((n = std::fread(block.data(), 1, block.size(), file.get())) > 0) {
    md5.Update(block.data(), n);
    if (progress != nullptr) progress->Add(n);
  }
  if (std::ferror(file.get())) {
    return absl::DataLossError(absl::StrFormat("read error in \"%s\"", path));
  }
  return md5.Hex();
}

absl::StatusOr<std::vector<FileCheck>> VerifyChecklist(const std::string& checklist_path, FILE* progress_out) {
  std::ifstream file(checklist_path);
  if (!file) {
    return absl::NotFoundError(absl::StrFormat("checklist \"%s\": cannot open", checklist_path));
  }
  std::stringstream text;
  text << file.rdbuf();
  ASSIGN_OR_RETURN(const std::vector<ChecklistEntry> entries, ParseChecklist(text.str(), checklist_path));
  const std::string dir = DirectoryOf(checklist_path);
  uint64_t total = 0;  // Missing files count nothing here; they are reported below.
  for (const ChecklistEntry& entry : entries) {
    std::error_code error;
    const uintmax_t size = std::filesystem::file_size(dir + "/" + entry.file, error);
    if (!error) total += size;
  }
  ProgressBar progress(absl::StrFormat("verify %s", checklist_path), total, progress_out);
  std::vector<FileCheck> checks;
  for (const ChecklistEntry& entry : entries) {
    absl::StatusOr<std::string> md5 = Md5File(dir + "/" + entry.file, &progress);
    if (absl::IsNotFound(md5.status())) {
      checks.push_back({entry.file, FileVerdict::kMissing, ""});
      continue;
    }
    RETURN_IF_ERROR(md5.status());
    checks.push_back({entry.file, *md5 == entry.md5 ? FileVerdict::kOk : FileVerdict::kMismatch, *md5});
  }
  progress.Finish();
  return checks;
}

absl::Status ChecklistStatus(const std::string& checklist_path, const std::vector<FileCheck>& checks) {
  std::vector<std::string> problems;
  for (const FileCheck& check : checks) {
    if (check.verdict == FileVerdict::kMissing) problems.push_back(check.file + " is missing");
    if (check.verdict == FileVerdict::kMismatch) {
      problems.push_back(check.file + " is corrupt or truncated (MD5 differs)");
    }
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::DataLossError(absl::StrFormat("%s: %d of %d files failed: %s", checklist_path,
                                             problems.size(), checks.size(),
                                             absl::StrJoin(problems, "; ")));
}

}  // namespace llama
