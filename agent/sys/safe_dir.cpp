// A checked directory and the files in it, by descriptor (see safe_dir.hpp).
#include "agent/sys/safe_dir.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

namespace erdma::agent {

Error io_error(int e, const std::string& what) {
  const ErrorCode code = (e == EACCES || e == EPERM || e == EROFS) ? ErrorCode::PermissionDenied
                         : e == ENOENT                             ? ErrorCode::NotFound
                                                                   : ErrorCode::Unavailable;
  return make_error(code, what + ": " + std::strerror(e));
}
namespace {

std::string octal(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(m & 07777));
  return buf;
}

// Who may change what is inside `st`: the agent's own directory must be the agent's and not writable
// by group or others; a parent may be root's (or the agent's), and writable by others only with the
// sticky bit (as /tmp), which keeps them from renaming what is not theirs.
Status check_dir(const struct stat& st, const std::string& path, bool last) {
  const uid_t me = ::geteuid();
  const bool group_other_writable = (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
  if (last) {
    if (st.st_uid != me) {
      return make_error(ErrorCode::FailedPrecondition,
                        path + " is owned by uid " + std::to_string(st.st_uid) + ", not by the agent (uid " +
                            std::to_string(me) + "); refusing to write into a directory someone else controls (chown " +
                            std::to_string(me) + " " + path + ")");
    }
    if (group_other_writable) {
      return make_error(ErrorCode::FailedPrecondition,
                        path + " has mode " + octal(st.st_mode) +
                            ": writable by group or others, who could swap the agent's files (chmod go-w " + path +
                            ")");
    }
    return {};
  }
  if (st.st_uid != 0 && st.st_uid != me) {
    return make_error(ErrorCode::FailedPrecondition, path + " (a parent of the agent's directory) is owned by uid " +
                                                         std::to_string(st.st_uid) +
                                                         ", who could replace the directory (chown root " + path + ")");
  }
  if (group_other_writable && (st.st_mode & S_ISVTX) == 0) {
    return make_error(ErrorCode::FailedPrecondition,
                      path + " (a parent of the agent's directory) has mode " + octal(st.st_mode) +
                          ": writable by group or others without the sticky bit, who could replace the directory "
                          "(chmod go-w " +
                          path + ")");
  }
  return {};
}

// ".<name>.<12 hex digits>": a dot-name (NFD ignores dot-files), unpredictable.
std::string temp_name(const std::string& name) {
  unsigned char r[6] = {};
  if (::getrandom(r, sizeof r, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof r)) {
    // Early boot without entropy: O_EXCL still makes a planted name a retry, never a follow.
    const auto t = static_cast<unsigned long>(::getpid()) ^ static_cast<unsigned long>(::time(nullptr));
    std::memcpy(r, &t, sizeof r);
  }
  static const char* hex = "0123456789abcdef";
  std::string out = "." + name + ".";
  for (unsigned char c : r) {
    out += hex[c >> 4];
    out += hex[c & 15];
  }
  return out;
}

}  // namespace

Result<SafeDir> SafeDir::open(const std::string& path, bool create) {
  if (path.empty() || path[0] != '/') {
    return make_error(ErrorCode::InvalidArgument, "\"" + path + "\" is not an absolute path");
  }
  common::UniqueFd cur(::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!cur.valid()) return io_error(errno, "opening /");
  std::string walked;
  size_t pos = 1;
  while (pos <= path.size()) {
    size_t end = path.find('/', pos);
    if (end == std::string::npos) end = path.size();
    const std::string part = path.substr(pos, end - pos);
    pos = end + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      return make_error(ErrorCode::InvalidArgument, path + ": \"..\" is not allowed; give the real path");
    }
    const std::string parent_path = walked.empty() ? "/" : walked;
    struct stat parent {};
    if (::fstat(cur.get(), &parent) != 0) return io_error(errno, "stat " + parent_path);
    ERDMA_TRY(check_dir(parent, parent_path, false));
    walked += "/" + part;
    int fd = ::openat(cur.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && create) {
      if (::mkdirat(cur.get(), part.c_str(), 0755) != 0 && errno != EEXIST)
        return io_error(errno, "creating " + walked);
      fd = ::openat(cur.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd < 0) {
      int e = errno;
      struct stat link {};
      // O_DIRECTORY|O_NOFOLLOW on a symbolic link fails with ENOTDIR, not ELOOP: ask what it is.
      if (e == ENOTDIR && ::fstatat(cur.get(), part.c_str(), &link, AT_SYMLINK_NOFOLLOW) == 0 &&
          S_ISLNK(link.st_mode)) {
        e = ELOOP;
      }
      if (e == ELOOP) {
        return make_error(ErrorCode::InvalidArgument,
                          walked + " is a symbolic link; the agent does not follow links on the way to " + path +
                              " (configure the real path)");
      }
      if (e == ENOTDIR) return make_error(ErrorCode::InvalidArgument, walked + " is not a directory");
      if (e == ENOENT) {
        return make_error(ErrorCode::NotFound, walked + " does not exist (create it, or mount it from the host)");
      }
      return io_error(e, "opening " + walked);
    }
    cur = common::UniqueFd(fd);
  }
  struct stat st {};
  if (::fstat(cur.get(), &st) != 0) return io_error(errno, "stat " + path);
  ERDMA_TRY(check_dir(st, walked.empty() ? "/" : walked, true));
  return SafeDir(walked.empty() ? "/" : walked, std::move(cur));
}

Result<std::optional<SafeDir::Regular>> SafeDir::read_regular(const std::string& name, size_t max_bytes) const {
  const std::string full = path_ + "/" + name;
  common::UniqueFd fd(::openat(fd_.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!fd.valid()) {
    const int e = errno;
    if (e == ENOENT || e == ELOOP) return std::optional<Regular>();  // absent, or a symbolic link: never followed
    return io_error(e, "opening " + full);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return io_error(errno, "stat " + full);
  if (!S_ISREG(st.st_mode)) return std::optional<Regular>();  // a FIFO, device or directory: not read
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    return make_error(ErrorCode::InvalidArgument, full + " is larger than " + std::to_string(max_bytes) + " bytes");
  }
  Regular out;
  out.mode = st.st_mode & 07777;
  out.owner = st.st_uid;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error(errno, "reading " + full);
    }
    if (n == 0) break;
    out.content.append(buf, static_cast<size_t>(n));
    if (out.content.size() > max_bytes) {
      return make_error(ErrorCode::InvalidArgument, full + " is larger than " + std::to_string(max_bytes) + " bytes");
    }
  }
  return std::optional<Regular>(std::move(out));
}

Result<bool> SafeDir::write_atomically(const std::string& name, const std::string& content, mode_t mode) const {
  const std::string full = path_ + "/" + name;
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
    return make_error(ErrorCode::InvalidArgument, "\"" + name + "\" is not a file name");
  }
  // Read no more than the new content: anything longer differs anyway.
  if (auto cur = read_regular(name, content.size()); cur && *cur) {
    const auto& r = **cur;
    if (r.content == content && r.mode == (mode & 07777) && r.owner == ::geteuid()) return false;
  }

  std::string tmp;
  common::UniqueFd fd;
  for (int attempt = 0; attempt < 16 && !fd.valid(); ++attempt) {
    tmp = temp_name(name);
    fd = common::UniqueFd(::openat(fd_.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd.valid() && errno != EEXIST) return io_error(errno, "creating a temporary file in " + path_);
  }
  if (!fd.valid())
    return make_error(ErrorCode::Unavailable, "creating a temporary file in " + path_ + ": every name taken");
  auto fail = [&](int e, const std::string& what) -> Result<bool> {
    ::unlinkat(fd_.get(), tmp.c_str(), 0);
    return io_error(e, what);
  };
  for (size_t off = 0; off < content.size();) {
    const ssize_t n = ::write(fd.get(), content.data() + off, content.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(errno, "writing " + path_ + "/" + tmp);
    }
    off += static_cast<size_t>(n);
  }
  if (::fchmod(fd.get(), mode & 07777) != 0) return fail(errno, "chmod " + path_ + "/" + tmp);
  if (::fsync(fd.get()) != 0) return fail(errno, "fsync " + path_ + "/" + tmp);
  if (::close(fd.release()) != 0) return fail(errno, "closing " + path_ + "/" + tmp);
  // rename(2) replaces whatever `name` is (a symbolic link included) without following it.
  if (::renameat(fd_.get(), tmp.c_str(), fd_.get(), name.c_str()) != 0) {
    return fail(errno, "renaming " + path_ + "/" + tmp + " to " + full);
  }
  ::fsync(fd_.get());  // makes the rename itself durable; a failure here loses nothing readers see
  return true;
}

Result<bool> SafeDir::remove(const std::string& name) const {
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
    return make_error(ErrorCode::InvalidArgument, "\"" + name + "\" is not a file name");
  }
  if (::unlinkat(fd_.get(), name.c_str(), 0) != 0) {
    if (errno == ENOENT) return false;
    return io_error(errno, "removing " + path_ + "/" + name);
  }
  ::fsync(fd_.get());
  return true;
}

Result<std::vector<std::string>> SafeDir::list() const {
  // A descriptor of our own: readdir moves the offset, and closedir closes what it was given.
  const int fd = ::openat(fd_.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return io_error(errno, "opening " + path_);
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    const int e = errno;
    ::close(fd);
    return io_error(e, "reading " + path_);
  }
  std::vector<std::string> names;
  errno = 0;
  while (const dirent* ent = ::readdir(dir)) {
    const std::string n = ent->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  const int e = errno;
  ::closedir(dir);
  if (e != 0) return io_error(e, "reading " + path_);
  return names;
}

}  // namespace erdma::agent
