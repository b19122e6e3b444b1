// The CA bundle, read again when it rotates (see trust_file.hpp).
#include "agent/kube/trust_file.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "common/log.hpp"

namespace erdma::agent::kube::https {
namespace log = common::log;

Result<std::unique_ptr<TrustFile>> TrustFile::open(std::string path) {
  std::unique_ptr<TrustFile> t(new TrustFile(std::move(path)));
  struct stat st {};
  if (::stat(t->path_.c_str(), &st) != 0) {
    return make_error(ErrorCode::FailedPrecondition, "CA file " + t->path_ + ": " + std::strerror(errno));
  }
  ERDMA_TRY_ASSIGN(auto tls, client_tls_context(t->path_));
  t->tls_ = std::move(tls);
  t->ino_ = st.st_ino;
  t->dev_ = st.st_dev;
  t->size_ = st.st_size;
  t->mtime_ = st.st_mtim;
  return t;
}

std::shared_ptr<ssl::context> TrustFile::current() {
  std::lock_guard<std::mutex> lock(mu_);
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    if (errors_.failed(std::string("stat: ") + std::strerror(errno))) {
      log::warn("the API server's CA file cannot be read; the last one read is kept")
          .kv("file", path_)
          .kv("error", std::strerror(errno));
    }
    return tls_;
  }
  const bool changed = st.st_ino != ino_ || st.st_dev != dev_ || st.st_size != size_ ||
                       st.st_mtim.tv_sec != mtime_.tv_sec || st.st_mtim.tv_nsec != mtime_.tv_nsec;
  if (!changed) return tls_;
  auto next = client_tls_context(path_);
  if (!next) {
    // Not remembered as seen: the next connection looks again, until a usable file is there.
    if (errors_.failed(next.error().message)) {
      log::warn("the API server's CA file changed but cannot be used; the last one read is kept")
          .kv("file", path_)
          .kv("error", next.error().message);
    }
    return tls_;
  }
  tls_ = std::move(next).value();
  ino_ = st.st_ino;
  dev_ = st.st_dev;
  size_ = st.st_size;
  mtime_ = st.st_mtim;
  ++reloads_;
  errors_.succeeded();
  log::info("the API server's CA file changed: new connections trust it").kv("file", path_);
  return tls_;
}

uint64_t TrustFile::reloads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reloads_;
}

}  // namespace erdma::agent::kube::https
