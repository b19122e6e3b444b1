// The kubelet socket keeper's loop (see socket_keeper.hpp).
#include "agent/kubelet/socket_keeper.hpp"

#include <algorithm>

#include <sys/inotify.h>
#include <unistd.h>

#include "common/guarded.hpp"
#include "common/log.hpp"

namespace erdma::agent::kubelet {
namespace log = common::log;
using std::chrono::milliseconds;

SocketKeeper::SocketKeeper(std::string name, std::vector<Dir> dirs, milliseconds check, Owner owner)
    : name_(std::move(name)), dirs_(std::move(dirs)), check_(check), owner_(std::move(owner)) {}

SocketKeeper::~SocketKeeper() { stop(); }

Status SocketKeeper::start() {
  if (thread_.joinable()) return {};
  ERDMA_TRY_ASSIGN(files_, common::FileWatch::open());
  if (!files_->has_inotify()) {
    // Without inotify the periodic check still notices a kubelet restart, only later.
    log::warn("inotify unavailable; kubelet restarts are noticed by polling").kv("error", files_->inotify_error());
  }
  watches_.assign(dirs_.size(), -1);
  watch_errors_.assign(dirs_.size(), common::RepeatFilter{});
  stopping_ = false;
  thread_ = std::thread([this] {
    common::run_restarting(
        name_, [this] { loop(); }, [this] { return stopping_.load(); });
  });
  return {};
}

void SocketKeeper::stop() {
  stopping_ = true;
  wake();
  if (thread_.joinable()) thread_.join();
}

void SocketKeeper::wake() const noexcept {
  if (files_) files_->wake();
}

void SocketKeeper::ensure_watches() {
  if (!files_->has_inotify()) return;
  for (size_t i = 0; i < dirs_.size(); ++i) {
    if (watches_[i] >= 0) continue;
    auto wd = files_->watch_dir(dirs_[i].path, dirs_[i].mask);
    if (!wd) {
      if (!dirs_[i].what.empty() && watch_errors_[i].failed(wd.error().message)) {
        log::warn("cannot watch " + dirs_[i].what + "; retrying")
            .kv("dir", dirs_[i].path)
            .kv("error", wd.error().message);
      }
      continue;
    }
    watches_[i] = *wd;
    watch_errors_[i].succeeded();
  }
}

void SocketKeeper::loop() {
  auto next_check = Clock::now() + check_;
  while (!stopping_) {
    ensure_watches();
    const auto wanted = owner_.act ? owner_.act() : Clock::time_point::max();
    const auto now = Clock::now();
    const auto wake_at = std::min(wanted, next_check);
    const int64_t wait =
        wake_at <= now ? 0 : std::min<int64_t>(std::chrono::duration_cast<milliseconds>(wake_at - now).count(), 1000);
    auto woke = files_->wait(milliseconds(wait));
    if (!woke.error) {
      if (poll_errors_.failed(woke.error.error().message))
        log::error("poll failed").kv("error", woke.error.error().message);
      ::usleep(100'000);  // bounded back-off; never spin
    } else {
      poll_errors_.succeeded();
    }
    if (stopping_) break;

    Pass pass;
    pass.woken = woke.woken;
    for (auto& ev : woke.events) {
      if ((ev.mask & IN_Q_OVERFLOW) != 0) {
        pass.events.push_back(Event{kNoDir, ev.mask, std::move(ev.name)});
        continue;
      }
      // Two dirs may share a watch (the same directory named twice): the event is news for both.
      for (size_t i = 0; i < dirs_.size(); ++i) {
        if (watches_[i] != ev.watch || ev.watch < 0) continue;
        // The directory itself went away: watched again once it is back.
        if ((ev.mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) != 0) watches_[i] = -1;
        pass.events.push_back(Event{i, ev.mask, ev.name});
      }
    }
    const auto after = Clock::now();
    if (after >= next_check) {
      pass.check_due = true;
      next_check = after + check_;
    }
    if (owner_.handle) owner_.handle(pass);
    ++passes_;
  }
}

}  // namespace erdma::agent::kubelet
