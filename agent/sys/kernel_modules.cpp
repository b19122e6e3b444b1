// sysfs driver facts and the atomic feature-file write (see kernel_modules.hpp).
#include "agent/sys/kernel_modules.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include "agent/sys/safe_dir.hpp"
#include "agent/sys/sysfs_rdma.hpp"

namespace erdma::agent {
namespace {

namespace fs = std::filesystem;

bool present(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

std::optional<std::string> read_small(const fs::path& p) {
  std::ifstream in(p);
  if (!in) return std::nullopt;
  std::string text(4096, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return sysfs::trim(text);
}

}  // namespace

std::string parse_node_type(std::string_view text) {
  const std::string t = sysfs::trim(text);
  const auto colon = t.find(':');
  if (colon == std::string::npos) return "";
  const std::string name = sysfs::trim(std::string_view(t).substr(colon + 1));
  return name == "CA" || name == "RNIC" || name == "SWITCH" || name == "ROUTER" || name == "USNIC" ? name : "";
}

DriverFacts read_driver_facts(const std::string& sys_root) {
  const fs::path mod = fs::path(sys_root) / "module";
  DriverFacts f;
  f.erdma_loaded = present(mod / "erdma");
  if (auto v = read_small(mod / "erdma/parameters/compat_mode")) {
    if (*v == "Y" || *v == "1") f.compat_mode = true;
    if (*v == "N" || *v == "0") f.compat_mode = false;
  }
  if (auto v = read_small(mod / "erdma/version")) f.erdma_version = *v;
  f.ofed_stack = present(mod / "mlx_compat");
  f.nvidia_loaded = present(mod / "nvidia");
  f.nvidia_peermem_loaded = present(mod / "nvidia_peermem");
  f.smc_loaded = present(mod / "smc");
  sysfs::SysfsRdmaReader reader(sys_root);
  if (auto names = reader.device_names()) {
    for (const auto& name : *names) {
      const fs::path dir = fs::path(sys_root) / "class/infiniband" / name;
      std::error_code ec;
      const auto driver = fs::read_symlink(dir / "device/driver", ec);
      const bool is_erdma = name.rfind("erdma", 0) == 0 || (!ec && driver.filename() == "erdma");
      if (!is_erdma) continue;
      if (auto t = read_small(dir / "node_type")) f.node_types.emplace_back(name, parse_node_type(*t));
    }
  }
  return f;
}

Result<bool> write_file_atomically(const std::string& path, const std::string& content) {
  const fs::path target(path);
  const std::string name = target.filename().string();
  if (name.empty()) return make_error(ErrorCode::InvalidArgument, path + ": names a directory, not a file");
  auto dir = SafeDir::open(target.parent_path().string(), false);
  if (!dir) {
    return make_error(dir.error().code, path + ": " + dir.error().message +
                                            " (the directory must exist, belong to the agent and be writable only by "
                                            "it; mount it from the host)");
  }
  auto w = dir->write_atomically(name, content, 0644);
  if (!w) return make_error(w.error().code, path + ": " + w.error().message);
  return *w;
}

Status run_modprobe(const std::string& modprobe, const std::string& module, int timeout_ms) {
  const std::string what = "modprobe " + module;
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0)
    return make_error(ErrorCode::Unavailable, what + ": pipe: " + std::strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2);
  std::string arg0 = modprobe, dashes = "--", name = module;
  char* argv[] = {arg0.data(), dashes.data(), name.data(), nullptr};
  char* envp[] = {nullptr};
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, modprobe.c_str(), &fa, nullptr, argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  ::close(pipefd[1]);
  if (rc != 0) {
    ::close(pipefd[0]);
    return make_error(ErrorCode::Unavailable, what + ": cannot run " + modprobe + ": " + std::strerror(rc) +
                                                  " (set driver.modprobe, or use an image that has kmod)");
  }
  std::string err;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  bool timed_out = false;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{pipefd[0], POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;
    char buf[512];
    const ssize_t got = ::read(pipefd[0], buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;  // EOF: modprobe closed stderr (exited)
    if (err.size() < 4096) err.append(buf, static_cast<size_t>(got));
  }
  ::close(pipefd[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return make_error(ErrorCode::DeadlineExceeded,
                      what + ": no answer after " + std::to_string(timeout_ms) + " ms; killed");
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
  while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
  const auto nl = err.rfind('\n');
  const std::string last = nl == std::string::npos ? err : err.substr(nl + 1);
  std::string msg = what + " failed";
  msg += WIFEXITED(status) ? " (exit " + std::to_string(WEXITSTATUS(status)) + ")" : " (killed by a signal)";
  if (!last.empty()) msg += ": " + last;
  msg += "; the agent needs CAP_SYS_MODULE and the host's /lib/modules mounted (manifests/load-modules), or load it on "
         "the node: modprobe " +
         module;
  return make_error(ErrorCode::FailedPrecondition, msg);
}

}  // namespace erdma::agent
