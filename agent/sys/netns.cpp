// setns(2)-based namespace runner and per-thread sysctl access (see netns.hpp).
#include "agent/sys/netns.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <future>
#include <linux/nsfs.h>
#include <memory>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

#include "agent/core/host_setup.hpp"
#include "common/guarded.hpp"
#include "common/unique_fd.hpp"

namespace erdma::agent {
namespace {

Error open_error(int e, const std::string& path) {
  if (e == ENOENT || e == ESRCH) return make_error(ErrorCode::NotFound, "network namespace " + path + " is gone");
  if (e == EACCES || e == EPERM) {
    return make_error(ErrorCode::PermissionDenied, "opening network namespace " + path + ": permission denied");
  }
  return make_error(ErrorCode::Unavailable, "opening network namespace " + path + ": " + std::strerror(e));
}

Result<NetnsId> identity_of(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return make_error(ErrorCode::Unavailable, "stat " + path + ": " + std::strerror(errno));
  return NetnsId{st.st_dev, st.st_ino};
}

// The descriptor to enter: the ref's own, or `path` opened now (and compared with the identity the
// ref expects). Checked to be a network namespace.
Result<std::shared_ptr<const common::UniqueFd>> netns_fd(const NetnsRef& ns) {
  std::shared_ptr<const common::UniqueFd> fd = ns.fd;
  if (!fd) {
    int raw = ::open(ns.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (raw < 0) return open_error(errno, ns.path);
    fd = std::make_shared<const common::UniqueFd>(raw);
    if (ns.expect) {
      ERDMA_TRY_ASSIGN(auto id, identity_of(fd->get(), ns.path));
      if (!(id == *ns.expect)) {
        return make_error(ErrorCode::NotFound,
                          "network namespace " + ns.path + " is gone (the path names another namespace now)");
      }
    }
  }
  int type = ::ioctl(fd->get(), NS_GET_NSTYPE);
  if (type < 0 || type != CLONE_NEWNET) {
    return make_error(ErrorCode::InvalidArgument, ns.path + " is not a network namespace");
  }
  return fd;
}

}  // namespace

NetnsRef NetnsRef::by_identity() const {
  NetnsRef out = of_path(path);
  out.expect = expect;
  if (fd) {
    if (auto id = identity_of(fd->get(), path)) out.expect = *id;
  }
  return out;
}

namespace {

// A NetnsRef holding the namespace file just opened as `raw` (or the open's errno when it is
// negative), with the identity every later use is checked against.
Result<NetnsRef> pinned(int raw, const std::string& path) {
  if (raw < 0) return open_error(errno, path);
  auto fd = std::make_shared<const common::UniqueFd>(raw);
  ERDMA_TRY_ASSIGN(auto id, identity_of(fd->get(), path));
  NetnsRef out = NetnsRef::of_path(path);
  out.fd = std::move(fd);
  out.expect = id;
  return out;
}

}  // namespace

Result<NetnsRef> open_netns_once(const std::string& path) {
  return pinned(::open(path.c_str(), O_RDONLY | O_CLOEXEC), path);
}

std::optional<uint64_t> parse_proc_start_time(std::string_view stat) {
  const auto close = stat.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  // After ") " come fields 3 (state) .. 22 (starttime).
  size_t pos = close + 1;
  for (int field = 3; field <= 22; ++field) {
    while (pos < stat.size() && stat[pos] == ' ') ++pos;
    const size_t end = std::min(stat.find(' ', pos), stat.size());
    if (pos >= end) return std::nullopt;
    if (field == 22) {
      uint64_t v = 0;
      for (size_t i = pos; i < end; ++i) {
        const char c = stat[i];
        if (c < '0' || c > '9' || v > (UINT64_MAX - 9) / 10) return std::nullopt;
        v = v * 10 + static_cast<uint64_t>(c - '0');
      }
      return v;
    }
    pos = end;
  }
  return std::nullopt;
}

uint64_t boot_ticks_now() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_BOOTTIME, &ts);
  const long hz = ::sysconf(_SC_CLK_TCK);
  const uint64_t ticks_per_s = hz > 0 ? static_cast<uint64_t>(hz) : 100;
  // Rounded up: a process that started in this very tick counts as started by now.
  return static_cast<uint64_t>(ts.tv_sec) * ticks_per_s +
         (static_cast<uint64_t>(ts.tv_nsec) * ticks_per_s + 999999999u) / 1000000000u;
}

Result<NetnsRef> open_process_netns(const std::string& proc_root, pid_t pid, uint64_t started_by) {
  const std::string dir = proc_root + "/" + std::to_string(pid);
  const std::string path = dir + "/ns/net";
  if (pid <= 0) return make_error(ErrorCode::InvalidArgument, "pid " + std::to_string(pid) + " names no process");
  common::UniqueFd proc(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!proc.valid()) return open_error(errno, path);
  // Read through the directory descriptor: the process it stands for, not whoever has the pid now.
  common::UniqueFd statfd(::openat(proc.get(), "stat", O_RDONLY | O_CLOEXEC));
  if (!statfd.valid()) return open_error(errno, path);
  char buf[1024];
  ssize_t n;
  do {
    n = ::read(statfd.get(), buf, sizeof buf - 1);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return open_error(errno, path);
  const auto started = parse_proc_start_time(std::string_view(buf, static_cast<size_t>(n)));
  if (!started) return make_error(ErrorCode::Unavailable, dir + "/stat: no start time in it (is procRoot a procfs?)");
  if (*started > started_by) {
    return make_error(ErrorCode::NotFound, "network namespace " + path + " is gone (pid " + std::to_string(pid) +
                                               " belongs to a process started after the runtime named it)");
  }
  return pinned(::openat(proc.get(), "ns/net", O_RDONLY | O_CLOEXEC), path);
}

bool is_runtime_netns_path(const std::string& path, const std::vector<std::string>& dirs) {
  if (path.empty() || path[0] != '/') return false;
  for (size_t pos = 1; pos <= path.size();) {
    size_t end = path.find('/', pos);
    if (end == std::string::npos) end = path.size();
    const std::string_view part(path.data() + pos, end - pos);
    if (part == "." || part == "..") return false;
    pos = end + 1;
  }
  for (const auto& d : dirs) {
    if (!d.empty() && path.size() > d.size() && path.compare(0, d.size(), d) == 0) return true;
  }
  return false;
}

Status SetnsNetns::run(const NetnsRef& ns, std::function<Status()> fn, std::chrono::steady_clock::time_point deadline) {
  // Opened (or taken from the ref) here: a vanished namespace is reported before any thread starts.
  auto fd = netns_fd(ns);
  if (!fd) return fd.error();
  // Shared with the worker so that a late worker never touches freed state.
  auto promise = std::make_shared<std::promise<Status>>();
  std::future<Status> result = promise->get_future();
  std::string path = ns.path;
  std::thread worker([promise, nsfd = *fd, fn = std::move(fn), path]() mutable {
    // The worker's own namespace changes; the process and the caller's thread keep theirs.
    if (::setns(nsfd->get(), CLONE_NEWNET) != 0) {
      int e = errno;
      promise->set_value(make_error(e == EPERM ? ErrorCode::PermissionDenied : ErrorCode::Unavailable,
                                    "joining network namespace " + path + ": " + std::strerror(e) +
                                        (e == EPERM ? " (needs CAP_SYS_ADMIN)" : "")));
      return;
    }
    nsfd.reset();
    Status outcome = make_error(ErrorCode::Internal, "work in network namespace " + path + " failed unexpectedly");
    common::run_guarded("network namespace work", [&] { outcome = fn(); });
    promise->set_value(std::move(outcome));
  });
  if (result.wait_until(deadline) != std::future_status::ready) {
    worker.detach();
    return make_error(ErrorCode::DeadlineExceeded, "work in network namespace " + ns.path + " did not finish in time");
  }
  worker.join();
  return result.get();
}

Result<bool> same_netns(const NetnsRef& a, const NetnsRef& b) {
  auto id = [](const NetnsRef& r) -> Result<NetnsId> {
    if (r.fd) return identity_of(r.fd->get(), r.path);
    struct stat st {};
    if (::stat(r.path.c_str(), &st) != 0) {
      const int e = errno;
      if (e == ENOENT || e == ESRCH) return make_error(ErrorCode::NotFound, "network namespace " + r.path + " is gone");
      if (e == EACCES || e == EPERM) {
        return make_error(ErrorCode::PermissionDenied, "network namespace " + r.path +
                                                           ": permission denied (reading another process's "
                                                           "namespace needs CAP_SYS_PTRACE)");
      }
      return make_error(ErrorCode::Unavailable, "network namespace " + r.path + ": " + std::strerror(e));
    }
    return NetnsId{st.st_dev, st.st_ino};
  };
  ERDMA_TRY_ASSIGN(auto ia, id(a));
  ERDMA_TRY_ASSIGN(auto ib, id(b));
  return ia == ib;
}

bool path_visible(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

Status write_sysctl(std::string_view name, std::string_view value, std::string_view proc_root) {
  const std::string path = sysctl_path(name, proc_root);
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    if (e == ENOENT) return make_error(ErrorCode::NotFound, "this kernel has no sysctl " + std::string(name));
    if (e == EACCES || e == EPERM || e == EROFS) {
      return make_error(ErrorCode::PermissionDenied,
                        "writing sysctl " + std::string(name) + " (" + path + "): " + std::strerror(e) +
                            (e == EROFS ? " (mount the host's /proc and set procRoot)" : ""));
    }
    return make_error(ErrorCode::Unavailable, "writing sysctl " + std::string(name) + ": " + std::strerror(e));
  }
  common::UniqueFd owned(fd);
  std::string line(value);
  line += '\n';
  ssize_t n = ::write(fd, line.data(), line.size());
  if (n < 0) {
    int e = errno;
    if (e == EINVAL || e == ERANGE) {
      return make_error(ErrorCode::InvalidArgument,
                        "sysctl " + std::string(name) + ": the kernel refused value \"" + std::string(value) + "\"");
    }
    return make_error(ErrorCode::Unavailable, "writing sysctl " + std::string(name) + ": " + std::strerror(e));
  }
  if (static_cast<size_t>(n) != line.size()) {
    return make_error(ErrorCode::Internal, "writing sysctl " + std::string(name) + ": short write");
  }
  return {};
}

Result<std::string> read_sysctl(std::string_view name, std::string_view proc_root) {
  const std::string path = sysctl_path(name, proc_root);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    if (e == ENOENT) return make_error(ErrorCode::NotFound, "this kernel has no sysctl " + std::string(name));
    return make_error(ErrorCode::Unavailable, "reading sysctl " + std::string(name) + ": " + std::strerror(e));
  }
  common::UniqueFd owned(fd);
  std::string out;
  char buf[256];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return make_error(ErrorCode::Unavailable, "reading sysctl " + std::string(name) + ": " + std::strerror(errno));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > 4096) break;
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

}  // namespace erdma::agent
