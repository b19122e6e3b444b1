// Running work inside another network namespace without leaking it: each run gets a fresh thread
// that joins the namespace with setns(2), does the work (netlink sockets it opens and /proc/sys/net
// files it writes belong to that namespace) and exits. The calling thread never changes namespace.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

#include "common/result.hpp"
#include "common/unique_fd.hpp"

namespace erdma::agent {

// The identity of a network namespace: its nsfs inode.
struct NetnsId {
  dev_t dev = 0;
  ino_t ino = 0;
  friend bool operator==(const NetnsId&, const NetnsId&) = default;
};

// A network namespace named by a file: a bind mount (/var/run/netns/x, a CRI sandbox's netns path)
// or /proc/<pid>/ns/net.
struct NetnsRef {
  std::string path;
  // Set by open_netns_once() / open_process_netns(): the namespace opened once. Netns::run() enters
  // this descriptor and same_netns() looks at it; neither opens `path` again, so what was checked is
  // what is entered. Shared: copies of the ref name one open namespace (and keep it alive).
  std::shared_ptr<const common::UniqueFd> fd;
  // Set by by_identity(): run() opens `path` again and answers NotFound when it is now another
  // namespace (the pod is gone and its pid or mount name was reused).
  std::optional<NetnsId> expect;

  [[nodiscard]] static NetnsRef of_path(std::string p) { return NetnsRef{std::move(p), nullptr, std::nullopt}; }
  [[nodiscard]] static NetnsRef of_pid(pid_t pid) { return of_path("/proc/" + std::to_string(pid) + "/ns/net"); }
  // The namespace the process started in (its main thread's).
  [[nodiscard]] static NetnsRef self() { return of_path("/proc/self/ns/net"); }
  // The same namespace by path and identity, without the descriptor: for keeping (the statistics
  // loop), where an open descriptor would keep a deleted pod's namespace alive.
  [[nodiscard]] NetnsRef by_identity() const;
};

// Opens the namespace file `path` once (O_RDONLY|O_CLOEXEC) and records its identity. NotFound when
// it is gone, PermissionDenied, Unavailable; each names the path. Whether it is a network namespace
// is checked when it is entered (Netns::run: InvalidArgument).
[[nodiscard]] Result<NetnsRef> open_netns_once(const std::string& path);

// The network namespace of process `pid` as `proc_root` (the host's /proc) shows it, without a pid
// reuse window: <proc_root>/<pid> is opened first, and that directory descriptor stays bound to
// the process it was opened for (once it exits, nothing opens through it, whoever takes the pid
// next). The process must have started no later than `started_by` (boot-time clock ticks, see
// boot_ticks_now(), taken before the runtime named the pid); a later start means the pid was
// reused meanwhile: NotFound, as for a process that is gone. The returned ref's path is
// <proc_root>/<pid>/ns/net. pidfd_open(2) is not used: the agent does not share the host's pid
// namespace, so its pids are not the runtime's.
[[nodiscard]] Result<NetnsRef> open_process_netns(const std::string& proc_root, pid_t pid, uint64_t started_by);

// Now, in the clock ticks since boot that /proc/<pid>/stat's starttime uses (CLOCK_BOOTTIME).
[[nodiscard]] uint64_t boot_ticks_now();

// Field 22 (starttime) of a /proc/<pid>/stat line; nullopt when malformed. The command (field 2)
// may hold spaces and parentheses: fields are counted after its last ')'.
[[nodiscard]] std::optional<uint64_t> parse_proc_start_time(std::string_view stat);

// Where a container runtime puts pod network namespaces. Paths from the runtime elsewhere are never
// opened (the sandbox process's namespace under procRoot is used instead when the runtime gave a pid).
inline const std::vector<std::string> kRuntimeNetnsDirs = {"/var/run/netns/", "/run/netns/", "/run/containerd/"};

// True when `path` is absolute, has no "." or ".." component and lies under one of `dirs` (each
// ending in '/').
[[nodiscard]] bool is_runtime_netns_path(const std::string& path, const std::vector<std::string>& dirs);

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

// True when both refer to the same namespace (same nsfs inode; a ref with a descriptor is looked
// at through it, with fstat). NotFound when either is gone, PermissionDenied when either cannot be
// looked at (another process's namespace needs CAP_SYS_PTRACE), each naming the path.
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
