// One thread's wait for "something to do": a wake-up from another thread (an eventfd) or a change
// in watched directories (inotify), bounded by a timeout. It owns both descriptors.
//
// The kubelet socket keeper (agent/kubelet: the device plugin's and the DRA driver's sockets) and
// the webhook's reloader (certificate and config rotation) are both this loop with their own
// reaction to the events.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "common/unique_fd.hpp"

namespace erdma::common {

class FileWatch {
 public:
  struct Event {
    int watch = -1;     // what watch_dir returned for the directory
    uint32_t mask = 0;  // IN_* bits; IN_Q_OVERFLOW means events were lost: check everything
    std::string name;   // the entry in the directory, empty for events on the directory itself
  };
  struct Wait {
    bool woken = false;         // wake() was called (once or more) since the last wait
    std::vector<Event> events;  // every queued inotify event, drained
    Status error;               // poll failed (the caller backs off; never spins)
  };

  // Errors: Unavailable when the eventfd cannot be made. Without inotify (its limits reached), the
  // watch still works for wake-ups and timeouts; inotify_error() says why it is missing.
  [[nodiscard]] static Result<FileWatch> open();

  FileWatch(FileWatch&&) noexcept = default;
  FileWatch& operator=(FileWatch&&) noexcept = default;
  FileWatch(const FileWatch&) = delete;
  FileWatch& operator=(const FileWatch&) = delete;
  ~FileWatch() = default;

  [[nodiscard]] bool has_inotify() const noexcept { return inotify_.valid(); }
  [[nodiscard]] const std::string& inotify_error() const noexcept { return inotify_error_; }

  // Watches `dir` for `mask`; the same directory again returns its existing watch. Errors:
  // Unavailable without inotify; NotFound, PermissionDenied or Unavailable from the kernel.
  [[nodiscard]] Result<int> watch_dir(const std::string& dir, uint32_t mask);

  // From any thread: the current or next wait() returns with woken set.
  void wake() const noexcept;

  // Waits for a wake-up or an event, at most `timeout` (0 polls once).
  [[nodiscard]] Wait wait(std::chrono::milliseconds timeout);

 private:
  FileWatch() = default;

  UniqueFd wake_;
  UniqueFd inotify_;
  std::string inotify_error_;
};

}  // namespace erdma::common
