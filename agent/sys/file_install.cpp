// Atomic file installation (see file_install.hpp).
#include "agent/sys/file_install.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/unique_fd.hpp"

namespace erdma::agent {
namespace {

Error io_error(int e, const std::string& what) {
  const ErrorCode code = (e == EACCES || e == EPERM || e == EROFS) ? ErrorCode::PermissionDenied
                         : e == ENOENT                           ? ErrorCode::NotFound
                                                                 : ErrorCode::Unavailable;
  return make_error(code, what + ": " + std::strerror(e));
}

Result<std::string> read_all(const std::string& path, size_t max_bytes, bool missing_is_error) {
  common::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT && !missing_is_error) return std::string();
    return io_error(errno, "opening " + path);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return io_error(errno, "stat " + path);
  if (!S_ISREG(st.st_mode)) return make_error(ErrorCode::InvalidArgument, path + " is not a regular file");
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    return make_error(ErrorCode::InvalidArgument, path + " is larger than " + std::to_string(max_bytes) + " bytes");
  }
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error(errno, "reading " + path);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max_bytes) {
      return make_error(ErrorCode::InvalidArgument, path + " is larger than " + std::to_string(max_bytes) + " bytes");
    }
  }
  return out;
}

Status make_dirs(const std::string& dir) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    const std::string part = dir.substr(0, pos);
    if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) return io_error(errno, "creating " + part);
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return io_error(errno, "stat " + dir);
  if (!S_ISDIR(st.st_mode)) return make_error(ErrorCode::InvalidArgument, dir + " is not a directory");
  return {};
}

}  // namespace

Result<InstallResult> install_file_atomically(const std::string& source, const std::string& dir,
                                              const std::string& name, size_t max_bytes) {
  ERDMA_TRY_ASSIGN(auto content, read_all(source, max_bytes, true));
  ERDMA_TRY(make_dirs(dir));
  const std::string target = dir + "/" + name;
  auto current = read_all(target, max_bytes, false);
  if (current && *current == content) {
    struct stat st {};
    if (::stat(target.c_str(), &st) == 0 && (st.st_mode & 0777) == 0755) return InstallResult::Unchanged;
  }

  // A unique temporary name in the same directory (rename(2) is atomic only within a filesystem).
  std::string tmp = dir + "/." + name + ".XXXXXX";
  common::UniqueFd fd(::mkostemp(tmp.data(), O_CLOEXEC));
  if (fd.get() < 0) return io_error(errno, "creating a temporary file in " + dir);
  auto fail = [&](int e, const std::string& what) -> Result<InstallResult> {
    ::unlink(tmp.c_str());
    return io_error(e, what);
  };
  for (size_t off = 0; off < content.size();) {
    const ssize_t n = ::write(fd.get(), content.data() + off, content.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(errno, "writing " + tmp);
    }
    off += static_cast<size_t>(n);
  }
  if (::fchmod(fd.get(), 0755) != 0) return fail(errno, "chmod " + tmp);
  if (::fsync(fd.get()) != 0) return fail(errno, "fsync " + tmp);
  if (::close(fd.release()) != 0) return fail(errno, "closing " + tmp);
  if (::rename(tmp.c_str(), target.c_str()) != 0) return fail(errno, "renaming " + tmp + " to " + target);
  // Make the rename itself durable.
  common::UniqueFd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (d.get() >= 0) ::fsync(d.get());
  return InstallResult::Installed;
}

}  // namespace erdma::agent
