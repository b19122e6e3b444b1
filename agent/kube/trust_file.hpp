// The CA bundle the HTTPS client trusts, read again when the file changes: when the cluster's root
// CA rotates, the kubelet rewrites the projected ca.crt (kube-root-ca.crt) by swapping its ..data
// symlink, so the file gets a new inode. Internal to the agent's API client (agent_kube); callers
// use api.hpp.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include <sys/types.h>
#include <time.h>

#include "agent/kube/https_connection.hpp"
#include "common/repeat_filter.hpp"
#include "common/result.hpp"

namespace erdma::agent::kube::https {

// Each new connection asks for current(): a file that changed since the last look (inode, device,
// size or mtime) is read, and when it holds a usable certificate its context serves the next
// connections; connections already open keep theirs. A changed file that is not usable (missing,
// empty, mid-rotation) keeps the last good context, and is logged once per distinct error until
// a good one comes. Thread-safe.
class TrustFile {
 public:
  // The first read: the errors of client_tls_context (FailedPrecondition naming the file).
  [[nodiscard]] static Result<std::unique_ptr<TrustFile>> open(std::string path);

  [[nodiscard]] std::shared_ptr<ssl::context> current();
  [[nodiscard]] uint64_t reloads() const;  // times a changed file was taken

 private:
  explicit TrustFile(std::string path) : path_(std::move(path)) {}

  const std::string path_;
  mutable std::mutex mu_;
  std::shared_ptr<ssl::context> tls_;
  ino_t ino_ = 0;
  dev_t dev_ = 0;
  off_t size_ = 0;
  timespec mtime_{};
  uint64_t reloads_ = 0;
  common::RepeatFilter errors_;
};

}  // namespace erdma::agent::kube::https
