#include "checkpoint/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace llama {

absl::StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    const std::string message = absl::StrFormat("\"%s\": %s", path, std::strerror(error));
    return error == ENOENT ? absl::NotFoundError(message) : absl::PermissionDeniedError(message);
  }
  struct stat info;
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrFormat("\"%s\" is not a regular file", path));
  }
  const size_t size = static_cast<size_t>(info.st_size);
  const uint8_t* data = nullptr;
  if (size > 0) {
    void* mapping = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapping == MAP_FAILED) {
      const int error = errno;
      ::close(fd);
      return absl::ResourceExhaustedError(
          absl::StrFormat("mmap of \"%s\" (%d bytes) failed: %s", path, size, std::strerror(error)));
    }
    data = static_cast<const uint8_t*>(mapping);
  }
  ::close(fd);  // The mapping keeps the file alive.
  return std::unique_ptr<MappedFile>(new MappedFile(path, data, size));
}

MappedFile::~MappedFile() {
  if (size_ > 0) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace llama
