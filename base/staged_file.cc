#include "base/staged_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "base/durable_file.h"
#include "base/status_macros.h"

namespace llama {

absl::StatusOr<std::unique_ptr<StagedFile>> StagedFile::Create(const std::string& path, const std::string& suffix) {
  const std::string partial = path + suffix;
  const int fd = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::PermissionDeniedError(absl::StrFormat("cannot create \"%s\": %s", partial, std::strerror(errno)));
  }
  return std::unique_ptr<StagedFile>(new StagedFile(path, partial, fd));
}

StagedFile::~StagedFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(partial_path_.c_str());
}

absl::Status StagedFile::Write(const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd_, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::ResourceExhaustedError(
          absl::StrFormat("write to \"%s\" failed: %s", partial_path_, std::strerror(errno)));
    }
    p += n;
    size -= n;
    position_ += n;
  }
  return absl::OkStatus();
}

absl::Status StagedFile::PadTo(uint64_t offset) {
  static const uint8_t kZeros[4096] = {};
  while (position_ < offset) {
    RETURN_IF_ERROR(Write(kZeros, std::min<uint64_t>(offset - position_, sizeof kZeros)));
  }
  return absl::OkStatus();
}

absl::Status StagedFile::WriteAt(uint64_t offset, const void* data, size_t size) {
  if (::pwrite(fd_, data, size, offset) != static_cast<ssize_t>(size)) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("write at offset %d of \"%s\" failed: %s", offset, partial_path_, std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status StagedFile::Commit() {
  if (::fsync(fd_) != 0) {
    return absl::InternalError(absl::StrFormat("fsync \"%s\": %s", partial_path_, std::strerror(errno)));
  }
  ::close(fd_);
  fd_ = -1;
  const absl::Status renamed = RenameDurably(partial_path_, path_);
  if (renamed.ok()) committed_ = true;
  return renamed;
}

}  // namespace llama
