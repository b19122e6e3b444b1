// Running work inside another network namespace without leaking it: each run gets a fresh thread
// that joins the namespace with setns(2), does the work (netlink sockets it opens and /proc/sys/net
// files it writes belong to that namespace) and exits. The calling thread never changes namespace.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <sys/types.h>

#include "common/result.hpp"

namespace erdma::agent {

// A network namespace named by a file: a bind mount (/var/run/netns/x, a CRI sandbox's netns path)
// or /proc/<pid>/ns/net.
struct NetnsRef {
  std::string path;

  [[nodiscard]] static NetnsRef of_path(std::string p) { return NetnsRef{std::move(p)}; }
  [[nodiscard]] static NetnsRef of_pid(pid_t pid) { return NetnsRef{"/proc/" + std::to_string(pid) + "/ns/net"}; }
  // The namespace the process started in (its main thread's).
  [[nodiscard]] static NetnsRef self() { return NetnsRef{"/proc/self/ns/net"}; }
};

class Netns {
 public:
  virtual ~Netns() = default;
  // Runs `fn` inside `ns` and returns its result. Errors of its own:
  // - NotFound: the namespace is gone (its process exited, its mount was removed) - a normal
  //   outcome for a pod that is being deleted;
  // - InvalidArgument: the path is not a network namespace;
  // - PermissionDenied: opening or joining needs CAP_SYS_ADMIN;
  // - DeadlineExceeded: `fn` did not finish by `deadline` (it keeps running on its own thread and
  //   its result is dropped; `fn` must therefore own or share everything it touches).
  [[nodiscard]] virtual Status run(const NetnsRef& ns, std::function<Status()> fn,
                                   std::chrono::steady_clock::time_point deadline) = 0;
};

// The setns(2) implementation.
class SetnsNetns final : public Netns {
 public:
  [[nodiscard]] Status run(const NetnsRef& ns, std::function<Status()> fn,
                           std::chrono::steady_clock::time_point deadline) override;
};

// True when both refer to the same namespace (same nsfs inode). NotFound when either is gone,
// PermissionDenied when either cannot be looked at (another process's namespace needs
// CAP_SYS_PTRACE), each naming the path.
[[nodiscard]] Result<bool> same_netns(const NetnsRef& a, const NetnsRef& b);

// True when `path` can be stat(2)ed from this process (a netns bind mount the runtime names may
// live in a mount namespace the agent does not see).
[[nodiscard]] bool path_visible(const std::string& path);

// sysctls of the calling thread's network namespace (for net.*): "net.smc.wmem" is
// <proc_root>/sys/net/smc/wmem. The netns of the thread that opens the file decides which values
// /proc/sys/net shows, so call these from the thread that joined the namespace (Netns::run). A
// container's own /proc/sys is usually mounted read-only; `proc_root` names another procfs mount
// (the host's /proc mounted at /host/proc). NotFound when this kernel has no such sysctl;
// InvalidArgument when the kernel refuses the value; PermissionDenied without the right
// capability or on a read-only mount.
[[nodiscard]] Status write_sysctl(std::string_view name, std::string_view value, std::string_view proc_root = "/proc");
[[nodiscard]] Result<std::string> read_sysctl(std::string_view name, std::string_view proc_root = "/proc");

}  // namespace erdma::agent
