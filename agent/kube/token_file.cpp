// The service-account token, read again when it rotates (see token_file.hpp).
#include "agent/kube/token_file.hpp"

#include <sys/stat.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>

namespace erdma::agent::kube::https {
namespace {

constexpr size_t kMaxTokenBytes = 64 * 1024;
// Even an unchanged token file is read again this often: a file system that keeps mtime and inode
// across a rewrite cannot hide a rotation for longer.
constexpr auto kTokenMaxAge = std::chrono::minutes(1);

}  // namespace

Result<std::string> TokenFile::current() {
  std::lock_guard<std::mutex> lock(mu_);
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    return make_error(ErrorCode::FailedPrecondition, "service-account token " + path_ + ": " + std::strerror(errno) +
                                                         " (is automountServiceAccountToken off?)");
  }
  const bool changed = !have_ || st.st_ino != ino_ || st.st_dev != dev_ || st.st_size != size_ ||
                       st.st_mtim.tv_sec != mtime_.tv_sec || st.st_mtim.tv_nsec != mtime_.tv_nsec;
  if (changed || Clock::now() - read_at_ > kTokenMaxAge) {
    std::ifstream in(path_, std::ios::binary);
    if (!in.is_open()) {
      return make_error(ErrorCode::FailedPrecondition,
                        "service-account token " + path_ + ": cannot open: " + std::strerror(errno));
    }
    std::string text(kMaxTokenBytes + 1, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    if (in.bad()) return make_error(ErrorCode::FailedPrecondition, "service-account token " + path_ + ": unreadable");
    text.resize(static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxTokenBytes) {
      return make_error(ErrorCode::FailedPrecondition, "service-account token " + path_ + ": over 64 KiB");
    }
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
    if (text.empty()) return make_error(ErrorCode::FailedPrecondition, "service-account token " + path_ + ": empty");
    if (text.find_first_of("\r\n") != std::string::npos) {
      return make_error(ErrorCode::FailedPrecondition,
                        "service-account token " + path_ + ": holds a line break (not a token)");
    }
    token_ = std::move(text);
    have_ = true;
    ino_ = st.st_ino;
    dev_ = st.st_dev;
    size_ = st.st_size;
    mtime_ = st.st_mtim;
    read_at_ = Clock::now();
  }
  return token_;
}

void TokenFile::invalidate() {
  std::lock_guard<std::mutex> lock(mu_);
  have_ = false;
}

}  // namespace erdma::agent::kube::https
