// An exclusive lock on a file (flock), for outputs that several processes
// may set out to write at once: two launchers or two nodes converting one
// checkpoint onto shared storage, two first-time demo runs. The second
// waits for the first, then finds its result. flock() works across hosts on
// NFS (the Linux client maps it to byte-range locks) and on Lustre mounted
// with -o flock; the holder's host and pid are written in the file, so a
// waiter can say whom it waits for.
//
// The holder removes the file when it lets go, so nothing is left behind; a
// waiter that then gets the lock of the removed file sees that the path no
// longer names it and locks afresh (the usual lock-then-check-inode dance).

#ifndef LLAMA_BASE_FILE_LOCK_H_
#define LLAMA_BASE_FILE_LOCK_H_

#include <functional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"

namespace llama {

class FileLock {
 public:
  // Takes the lock on `path` (created if missing), waiting as long as
  // another process holds it; `on_wait` is called once, with what the
  // holder wrote ("host pid"), before waiting. Errors name the file;
  // Unimplemented where the filesystem takes no locks (ENOLCK: NFS without
  // a lock daemon, Lustre without -o flock).
  static absl::StatusOr<FileLock> Acquire(const std::string& path,
                                          const std::function<void(const std::string& holder)>& on_wait = nullptr);

  // Some process holds the lock on `path` now (a probe: a shared lock taken
  // and let go at once, or refused).
  static bool IsHeld(const std::string& path);

  FileLock(FileLock&& other) noexcept : path_(std::move(other.path_)), fd_(other.fd_) { other.fd_ = -1; }
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

 private:
  FileLock(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  void Release();

  std::string path_;
  int fd_;
};

}  // namespace llama

#endif  // LLAMA_BASE_FILE_LOCK_H_
