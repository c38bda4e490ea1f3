#include "base/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"

namespace llama {
namespace {

absl::Status Errno(const std::string& what, const std::string& path) {
  return absl::InternalError(absl::StrFormat("%s %s: %s", what, path, std::strerror(errno)));
}

std::string Holder(int fd) {
  char text[256] = {};
  const ssize_t n = pread(fd, text, sizeof(text) - 1, 0);
  std::string holder = n > 0 ? std::string(text, n) : std::string("an unknown process");
  while (!holder.empty() && (holder.back() == '\n' || holder.back() == '\0')) holder.pop_back();
  return holder;
}

}  // namespace

absl::StatusOr<FileLock> FileLock::Acquire(const std::string& path,
                                           const std::function<void(const std::string& holder)>& on_wait) {
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("cannot open the lock file", path);
  FileLock lock(fd);
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) return Errno("cannot lock", path);
    if (on_wait) on_wait(Holder(fd));
    while (flock(fd, LOCK_EX) != 0) {
      if (errno != EINTR) return Errno("cannot lock", path);
    }
  }
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  const std::string holder = absl::StrFormat("%s pid %d\n", host, getpid());
  // Best effort: the lock holds whether or not the note is written.
  if (ftruncate(fd, 0) == 0) {
    [[maybe_unused]] const ssize_t written = pwrite(fd, holder.data(), holder.size(), 0);
  }
  return lock;
}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

FileLock::~FileLock() {
  if (fd_ >= 0) close(fd_);  // Closing the last descriptor releases the lock.
}

}  // namespace llama
