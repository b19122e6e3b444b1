// Atomic file installation (see file_install.hpp).
#include "agent/sys/file_install.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/sys/safe_dir.hpp"
#include "common/unique_fd.hpp"

namespace erdma::agent {
namespace {

Result<std::string> read_all(const std::string& path, size_t max_bytes, bool missing_is_error) {
  common::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
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

}  // namespace

Result<InstallResult> install_file_atomically(const std::string& source, const std::string& dir,
                                              const std::string& name, size_t max_bytes) {
  ERDMA_TRY_ASSIGN(auto content, read_all(source, max_bytes, true));
  // The host directory is opened once and checked; the target inside it is never followed
  // (a symbolic link or FIFO there is replaced by the new file, not read through).
  ERDMA_TRY_ASSIGN(auto host_dir, SafeDir::open(dir, true));
  ERDMA_TRY_ASSIGN(const bool written, host_dir.write_atomically(name, content, 0755));
  return written ? InstallResult::Installed : InstallResult::Unchanged;
}

}  // namespace erdma::agent
