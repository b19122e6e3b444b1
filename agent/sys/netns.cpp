// setns(2)-based namespace runner and per-thread sysctl access (see netns.hpp).
#include "agent/sys/netns.hpp"

#include <cerrno>
#include <cstring>
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
#include "common/unique_fd.hpp"

namespace erdma::agent {
namespace {

Result<std::shared_ptr<common::UniqueFd>> open_netns(const NetnsRef& ns) {
  int fd = ::open(ns.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    if (e == ENOENT || e == ESRCH) {
      return make_error(ErrorCode::NotFound, "network namespace " + ns.path + " is gone");
    }
    if (e == EACCES || e == EPERM) {
      return make_error(ErrorCode::PermissionDenied, "opening network namespace " + ns.path + ": permission denied");
    }
    return make_error(ErrorCode::Unavailable, "opening network namespace " + ns.path + ": " + std::strerror(e));
  }
  auto owned = std::make_shared<common::UniqueFd>(fd);
  int type = ::ioctl(fd, NS_GET_NSTYPE);
  if (type < 0 || type != CLONE_NEWNET) {
    return make_error(ErrorCode::InvalidArgument, ns.path + " is not a network namespace");
  }
  return owned;
}

}  // namespace

Status SetnsNetns::run(const NetnsRef& ns, std::function<Status()> fn, std::chrono::steady_clock::time_point deadline) {
  auto fd = open_netns(ns);  // opened here: a vanished namespace is reported before any thread starts
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
    promise->set_value(fn());
  });
  if (result.wait_until(deadline) != std::future_status::ready) {
    worker.detach();
    return make_error(ErrorCode::DeadlineExceeded, "work in network namespace " + ns.path + " did not finish in time");
  }
  worker.join();
  return result.get();
}

Result<bool> same_netns(const NetnsRef& a, const NetnsRef& b) {
  auto id = [](const NetnsRef& r) -> Result<std::pair<dev_t, ino_t>> {
    struct stat st {};
    if (::stat(r.path.c_str(), &st) != 0) {
      const int e = errno;
      if (e == ENOENT || e == ESRCH) return make_error(ErrorCode::NotFound, "network namespace " + r.path + " is gone");
      if (e == EACCES || e == EPERM) {
        return make_error(ErrorCode::PermissionDenied,
                          "network namespace " + r.path + ": permission denied (reading another process's "
                                                          "namespace needs CAP_SYS_PTRACE)");
      }
      return make_error(ErrorCode::Unavailable, "network namespace " + r.path + ": " + std::strerror(e));
    }
    return std::make_pair(st.st_dev, st.st_ino);
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
      return make_error(ErrorCode::PermissionDenied, "writing sysctl " + std::string(name) + " (" + path + "): " +
                                                         std::strerror(e) +
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
