// Durable file operations for outputs that must never be seen half-written,
// and the whole-file read every small input (JSON, checklists) goes through.

#ifndef LLAMA_BASE_DURABLE_FILE_H_
#define LLAMA_BASE_DURABLE_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace llama {

// fsync()s the directory `path`, making renames and creations inside it
// durable.
absl::Status FsyncDirectory(const std::string& path);

// rename(from, to), then fsync of the directory holding `to`.
absl::Status RenameDurably(const std::string& from, const std::string& to);

// The contents of `path`; an error names the file.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// Makes the folder `dir` if missing, then creates and removes a file in it:
// permission bits do not tell whether that works (root ignores them; a
// read-only mount overrides them). The error says which step failed, why.
absl::Status ProbeWritableFolder(const std::string& dir);

// Removes the folders under `root` that are empty (deepest first, so a
// folder of empty folders goes too), and `root` itself when `root_too`
// and it is empty. Never a file: after a failed download the partial files
// to resume from stay.
void RemoveEmptyFolders(const std::string& root, bool root_too);

// The directory part of `path` ("." when it has none).
std::string DirectoryOf(const std::string& path);

}  // namespace llama

#endif  // LLAMA_BASE_DURABLE_FILE_H_
