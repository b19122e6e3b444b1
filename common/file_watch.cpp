#include "common/file_watch.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace erdma::common {

Result<FileWatch> FileWatch::open() {
  FileWatch w;
  w.wake_ = UniqueFd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!w.wake_.valid()) return make_error(ErrorCode::Unavailable, std::string("eventfd: ") + std::strerror(errno));
  w.inotify_ = UniqueFd(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!w.inotify_.valid()) w.inotify_error_ = std::string("inotify: ") + std::strerror(errno);
  return w;
}

Result<int> FileWatch::watch_dir(const std::string& dir, uint32_t mask) {
  if (!inotify_.valid()) return make_error(ErrorCode::Unavailable, inotify_error_);
  const int wd = ::inotify_add_watch(inotify_.get(), dir.c_str(), mask);
  if (wd < 0) {
    const int e = errno;
    return make_error(e == ENOENT || e == ENOTDIR ? ErrorCode::NotFound
                      : e == EACCES               ? ErrorCode::PermissionDenied
                                                  : ErrorCode::Unavailable,
                      "watching " + dir + ": " + std::strerror(e));
  }
  return wd;
}

void FileWatch::wake() const noexcept {
  const uint64_t one = 1;
  // EAGAIN means the counter is already non-zero: the waiter wakes anyway.
  [[maybe_unused]] const auto n = ::write(wake_.get(), &one, sizeof one);
}

FileWatch::Wait FileWatch::wait(std::chrono::milliseconds timeout) {
  Wait out;
  const auto ms = std::clamp<int64_t>(timeout.count(), 0, 24 * 3600 * 1000);
  pollfd fds[2] = {{wake_.get(), POLLIN, 0}, {inotify_.get(), POLLIN, 0}};
  const int ready = ::poll(fds, inotify_.valid() ? 2 : 1, static_cast<int>(ms));
  if (ready < 0) {
    if (errno != EINTR) out.error = make_error(ErrorCode::Internal, std::string("poll: ") + std::strerror(errno));
    return out;
  }
  if ((fds[0].revents & POLLIN) != 0) {
    uint64_t v = 0;
    [[maybe_unused]] const auto n = ::read(wake_.get(), &v, sizeof v);
    out.woken = true;
  }
  if (inotify_.valid() && (fds[1].revents & POLLIN) != 0) {
    alignas(inotify_event) char buf[8192];
    for (;;) {
      const ssize_t n = ::read(inotify_.get(), buf, sizeof buf);
      if (n <= 0) break;  // EAGAIN: drained
      for (ssize_t off = 0; off < n;) {
        const auto* ev = reinterpret_cast<const inotify_event*>(buf + off);
        off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
        out.events.push_back(Event{ev->wd, ev->mask, ev->len > 0 ? std::string(ev->name) : std::string()});
      }
    }
  }
  return out;
}

}  // namespace erdma::common
