#include "base/durable_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <vector>

#include "absl/strings/str_format.h"

namespace llama {

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return absl::NotFoundError(absl::StrFormat("\"%s\": cannot open (%s)", path, std::strerror(errno)));
  }
  std::stringstream text;
  text << file.rdbuf();
  if (file.bad()) return absl::DataLossError(absl::StrFormat("\"%s\": read failed", path));
  return text.str();
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

absl::Status FsyncDirectory(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return absl::InternalError(absl::StrFormat("open directory \"%s\": %s", path, std::strerror(errno)));
  }
  const int result = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (result != 0) {
    return absl::InternalError(absl::StrFormat("fsync directory \"%s\": %s", path, std::strerror(error)));
  }
  return absl::OkStatus();
}

absl::Status RenameDurably(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0) {
    return absl::InternalError(
        absl::StrFormat("rename \"%s\" to \"%s\": %s", from, to, std::strerror(errno)));
  }
  return FsyncDirectory(DirectoryOf(to));
}

absl::Status ProbeWritableFolder(const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return absl::PermissionDeniedError(absl::StrFormat("cannot create \"%s\": %s", dir, error.message()));
  std::string probe = dir + "/.write-probe-XXXXXX";
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) {
    return absl::PermissionDeniedError(
        absl::StrFormat("cannot create files in \"%s\": %s", dir, std::strerror(errno)));
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return absl::OkStatus();
}

void RemoveEmptyFolders(const std::string& root, bool root_too) {
  namespace fs = std::filesystem;
  std::error_code error;
  std::vector<fs::path> folders;
  for (fs::recursive_directory_iterator it(root, error), end; !error && it != end; it.increment(error)) {
    if (it->is_directory(error)) folders.push_back(it->path());
  }
  std::sort(folders.begin(), folders.end(), [](const fs::path& a, const fs::path& b) {
    return std::distance(a.begin(), a.end()) > std::distance(b.begin(), b.end());
  });
  for (const fs::path& folder : folders) fs::remove(folder, error);  // Only empty ones go.
  if (root_too) fs::remove(root, error);
}

}  // namespace llama
