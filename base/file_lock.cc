#include "base/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
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

// Whether `fd` is still the file at `path` (its holder removes it when done).
bool StillNamedBy(int fd, const std::string& path) {
  struct stat by_fd, by_path;
  return fstat(fd, &by_fd) == 0 && stat(path.c_str(), &by_path) == 0 && by_fd.st_dev == by_path.st_dev &&
         by_fd.st_ino == by_path.st_ino;
}

}  // namespace

absl::StatusOr<FileLock> FileLock::Acquire(const std::string& path,
                                           const std::function<void(const std::string& holder)>& on_wait) {
  bool told = false;
  while (true) {
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return Errno("cannot open the lock file", path);
    // Not ours to remove until it is locked and still the file at `path`:
    // an error before that must not unlink the holder's file.
    FileLock lock("", fd);
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      if (errno == ENOLCK || errno == EOPNOTSUPP || errno == ENOSYS) {
        return absl::UnimplementedError(absl::StrFormat("%s: this filesystem takes no locks (%s)", path,
                                                        std::strerror(errno)));
      }
      if (errno != EWOULDBLOCK) return Errno("cannot lock", path);
      if (on_wait && !told) on_wait(Holder(fd));
      told = true;
      while (flock(fd, LOCK_EX) != 0) {
        if (errno != EINTR) return Errno("cannot lock", path);
      }
    }
    if (!StillNamedBy(fd, path)) continue;  // Its holder removed it: lock the file there now.
    lock.path_ = path;
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    const std::string holder = absl::StrFormat("%s pid %d\n", host, getpid());
    // Best effort: the lock holds whether or not the note is written.
    if (ftruncate(fd, 0) == 0) {
      [[maybe_unused]] const ssize_t written = pwrite(fd, holder.data(), holder.size(), 0);
    }
    return lock;
  }
}

bool FileLock::IsHeld(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool held = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  close(fd);
  return held;
}

void FileLock::Release() {
  if (fd_ < 0) return;
  // Removed while still held, so no one locks it after we let go.
  if (!path_.empty()) unlink(path_.c_str());
  close(fd_);
  fd_ = -1;
}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    Release();
    path_ = std::move(other.path_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

FileLock::~FileLock() { Release(); }

}  // namespace llama
