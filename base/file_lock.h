// An exclusive lock on a file (flock), for outputs that several processes
// may set out to write at once: two launchers or two nodes converting one
// checkpoint onto shared storage, two first-time demo runs. The second
// waits for the first, then finds its result. flock() works across hosts on
// NFS (the Linux client maps it to byte-range locks) and on Lustre mounted
// with -o flock; the holder's host and pid are written in the file, so a
// waiter can say whom it waits for.
//
// The file is left in place when released: removing it would let a third
// process lock a new file while a second still waits on the old one.

#ifndef LLAMA_BASE_FILE_LOCK_H_
#define LLAMA_BASE_FILE_LOCK_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"

namespace llama {

class FileLock {
 public:
  // Takes the lock on `path` (created if missing), waiting as long as
  // another process holds it; `on_wait` is called once, with what the
  // holder wrote ("host pid"), before waiting. Errors name the file.
  static absl::StatusOr<FileLock> Acquire(const std::string& path,
                                          const std::function<void(const std::string& holder)>& on_wait = nullptr);

  FileLock(FileLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace llama

#endif  // LLAMA_BASE_FILE_LOCK_H_
