// Keeps the sockets the kubelet reads served: one thread that watches the directories holding
// them and hands each pass's news to its owner, which serves and registers again.
//
// The kubelet deletes the sockets in its device-plugin directory when it starts, a cleanup may
// remove a DRA driver's registration socket, and a directory may be gone for a while. The
// device plugin (agent/deviceplugin/plugin_runtime) and the DRA driver (agent/dra/dra_plugin) both
// need the same loop for that: inotify on the directories (a watch is added again once its
// directory is back), a periodic check as the backstop and the only means without inotify, a
// wake-up from other threads, a bounded back-off when poll fails, and a prompt stop. What they
// serve, how they register and what they log about it stays theirs: `act` and `handle` below.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/file_watch.hpp"
#include "common/repeat_filter.hpp"
#include "common/result.hpp"

namespace erdma::agent::kubelet {

class SocketKeeper {
 public:
  using Clock = std::chrono::steady_clock;

  struct Dir {
    std::string path;
    uint32_t mask = 0;  // IN_* bits to watch (IN_IGNORED and IN_Q_OVERFLOW come regardless)
    // Names the directory in "cannot watch <what>; retrying" (logged once per distinct error).
    std::string what;
  };
  // An inotify event, with the directory it came from.
  static constexpr size_t kNoDir = static_cast<size_t>(-1);
  struct Event {
    size_t dir = kNoDir;  // index into the dirs given; kNoDir for IN_Q_OVERFLOW (events were lost)
    uint32_t mask = 0;
    std::string name;  // the entry in the directory, empty for events on the directory itself
  };
  struct Pass {
    std::vector<Event> events;  // drained in this pass, in order
    bool check_due = false;     // the periodic check's time has come: look at every socket
    bool woken = false;         // wake() was called since the last pass
  };
  // Both run on the keeper's thread, one after the other, never concurrently.
  struct Owner {
    // Before each wait, after the watches were (re)added: serve, register, whatever is pending.
    // Returns when the owner wants the next pass at the latest (Clock::time_point::max(): no
    // wish; the periodic check still comes).
    std::function<Clock::time_point()> act;
    // After each wait: what happened meanwhile.
    std::function<void(const Pass&)> handle;
  };

  // `name` names the thread in the guarded-thread log lines ("device plugin loop"). `check` is
  // the period of Pass::check_due; no wait is longer than it, nor than a second.
  SocketKeeper(std::string name, std::vector<Dir> dirs, std::chrono::milliseconds check, Owner owner);
  ~SocketKeeper();
  SocketKeeper(const SocketKeeper&) = delete;
  SocketKeeper& operator=(const SocketKeeper&) = delete;

  // Opens the watch and starts the thread; the first pass comes at once. A missing directory is
  // not an error: it is watched once it exists, and the periodic check covers the time between.
  // Without inotify (its limits reached) logs that the sockets are checked by polling only.
  // Errors: Unavailable when the wake-up eventfd cannot be made. A no-op while running; after
  // stop() it starts anew.
  [[nodiscard]] Status start();
  // Ends the thread: a wait in progress returns at once. Idempotent; the owner's callbacks are
  // not called after it returns.
  void stop();
  // From any thread: the next pass comes now (Pass::woken). A no-op before start().
  void wake() const noexcept;

  // Passes completed (each handles what was queued before its wait returned), for tests that
  // check that something does NOT happen.
  [[nodiscard]] uint64_t passes() const noexcept { return passes_.load(); }
  [[nodiscard]] bool has_inotify() const noexcept { return files_ && files_->has_inotify(); }

 private:
  void loop();
  void ensure_watches();

  const std::string name_;
  std::vector<Dir> dirs_;
  const std::chrono::milliseconds check_;
  Owner owner_;
  std::optional<common::FileWatch> files_;  // made by start()
  std::vector<int> watches_;                // per dir: its inotify watch, or -1
  std::vector<common::RepeatFilter> watch_errors_;
  common::RepeatFilter poll_errors_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> passes_{0};
};

}  // namespace erdma::agent::kubelet
