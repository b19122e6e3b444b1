// The service-account bearer token the HTTPS client sends, read from its file and read again when
// it rotates. Internal to the agent's API client (agent_kube); callers use api.hpp.
#pragma once

#include <chrono>
#include <mutex>
#include <string>

#include <sys/types.h>
#include <time.h>

#include "common/result.hpp"

namespace erdma::agent::kube::https {

// The bearer token, read again when the file changes (kubelet rotates projected tokens by
// swapping the ..data symlink: a new inode) or was read over a minute ago, or after a 401.
// Thread-safe.
class TokenFile {
 public:
  explicit TokenFile(std::string path) : path_(std::move(path)) {}

  // The token, trailing whitespace removed. FailedPrecondition naming the file when it is missing
  // (is automountServiceAccountToken off?), unreadable, empty, over 64 KiB or holds a line break.
  [[nodiscard]] Result<std::string> current();

  // The server refused it: read the file again before the next request.
  void invalidate();

 private:
  using Clock = std::chrono::steady_clock;

  const std::string path_;
  std::mutex mu_;
  bool have_ = false;
  ino_t ino_ = 0;
  dev_t dev_ = 0;
  off_t size_ = 0;
  timespec mtime_{};
  Clock::time_point read_at_{};
  std::string token_;
};

}  // namespace erdma::agent::kube::https
