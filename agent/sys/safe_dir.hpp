// A host directory the agent writes into (NFD's features.d, the preload library's directory),
// opened once and checked, so that nothing another node component plants in it is followed: every
// file is opened relative to the directory's descriptor, with O_NOFOLLOW, new files with O_EXCL.
#pragma once

#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

#include "common/result.hpp"
#include "common/unique_fd.hpp"

namespace erdma::agent {

// An errno `e` from a file operation as an Error: PermissionDenied for EACCES/EPERM/EROFS,
// NotFound for ENOENT, Unavailable otherwise; the message is `what: strerror(e)`.
[[nodiscard]] Error io_error(int e, const std::string& what);

class SafeDir {
 public:
  // Opens the absolute `path` component by component (openat with O_DIRECTORY|O_NOFOLLOW from "/"),
  // creating missing ones (mode 0755) when `create`. Refused, with an error that says how to fix
  // it:
  // - a symbolic link anywhere in the path (InvalidArgument: give the real path);
  // - the directory itself not owned by the agent's effective user, or writable by group or others
  //   (FailedPrecondition: chown root / chmod go-w); no sticky-bit exception: a directory others may
  //   write to is one where they can swap the file between two of our calls;
  // - a parent owned by someone else than root or the agent, or writable by group or others without
  //   the sticky bit (FailedPrecondition: whoever can rename it can swap the directory itself).
  // NotFound when a component is missing and `create` is false; PermissionDenied / Unavailable for
  // other I/O errors. Each names the path.
  [[nodiscard]] static Result<SafeDir> open(const std::string& path, bool create);

  // The regular file `name` in this directory, or nullopt when there is none (missing, or something
  // else than a regular file: a symbolic link, a FIFO, a directory; none of them is followed or read).
  // Opened with O_NOFOLLOW|O_NONBLOCK, so a planted FIFO never blocks. InvalidArgument when larger than
  // `max_bytes`; Unavailable / PermissionDenied for I/O errors.
  struct Regular {
    std::string content;
    mode_t mode = 0;  // permission bits
    uid_t owner = 0;
  };
  [[nodiscard]] Result<std::optional<Regular>> read_regular(const std::string& name, size_t max_bytes) const;

  // Makes `name` a regular file of the agent's with exactly `content` and permission bits `mode`.
  // Returns false (nothing written) when it is already that. Otherwise writes a new file under a
  // unique dot-name (O_CREAT|O_EXCL|O_NOFOLLOW), fsyncs it and renames it over `name` (which
  // replaces a symbolic link or FIFO there without following it), then fsyncs the directory.
  // Readers see the old file or the new one, never a part. Never leaves the temporary file behind.
  // Errors name the path: PermissionDenied / Unavailable.
  [[nodiscard]] Result<bool> write_atomically(const std::string& name, const std::string& content, mode_t mode) const;

  // Removes the file `name` (never a directory; a symbolic link is removed, not followed). Returns
  // false when there was nothing to remove. The directory is fsynced after. Errors name the path.
  [[nodiscard]] Result<bool> remove(const std::string& name) const;

  // The names of the directory's entries ("." and ".." left out), in no particular order.
  [[nodiscard]] Result<std::vector<std::string>> list() const;

  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  [[nodiscard]] int fd() const noexcept { return fd_.get(); }

 private:
  SafeDir(std::string path, common::UniqueFd fd) : path_(std::move(path)), fd_(std::move(fd)) {}
  std::string path_;
  common::UniqueFd fd_;
};

}  // namespace erdma::agent
