// checklist.chk verification, as `md5sum -c checklist.chk` does it for
// Meta's downloads: one "<md5 hex>  <file name>" line per file.

#ifndef LLAMA_CHECKPOINT_CHECKLIST_H_
#define LLAMA_CHECKPOINT_CHECKLIST_H_

#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace llama {

struct ChecklistEntry {
  std::string md5;   // 32 lower-case hex digits.
  std::string file;  // Relative to the checklist's directory.
};

// Parses md5sum output (text or binary mode, "<hex>  <name>" or
// "<hex> *<name>"); errors name `source` and the line.
absl::StatusOr<std::vector<ChecklistEntry>> ParseChecklist(absl::string_view text,
                                                           absl::string_view source);

// An incremental MD5 (OpenSSL), for hashing data as it streams by.
class Md5 {
 public:
  Md5();
  ~Md5();
  Md5(const Md5&) = delete;
  Md5& operator=(const Md5&) = delete;
  void Reset();
  void Update(const void* data, size_t size);
  // Lower-case hex digest of everything since the last Reset; then Reset.
  std::string Hex();

 private:
  struct Context;
  Context* context_;
};

class ProgressBar;

// MD5 of a file, read in 8 MiB blocks (never whole into memory), each
// block added to `progress` when given.
absl::StatusOr<std::string> Md5File(const std::string& path, ProgressBar* progress = nullptr);

enum class FileVerdict { kOk, kMissing, kMismatch };

struct FileCheck {
  std::string file;
  FileVerdict verdict;
  std::string actual_md5;  // Empty when missing.
};

// Checks every file `checklist_path` lists, relative to its directory. The
// result lists every file; use ChecklistStatus to turn it into an error.
// Hashing a 70B checkpoint takes minutes: with `progress_out`, a progress
// display there, as conversion shows (base/progress.h).
absl::StatusOr<std::vector<FileCheck>> VerifyChecklist(const std::string& checklist_path,
                                                       FILE* progress_out = nullptr);

// OK when every file passed; otherwise an error naming each file that is
// missing or whose MD5 differs (a truncated or corrupt download).
absl::Status ChecklistStatus(const std::string& checklist_path, const std::vector<FileCheck>& checks);

}  // namespace llama

#endif  // LLAMA_CHECKPOINT_CHECKLIST_H_
