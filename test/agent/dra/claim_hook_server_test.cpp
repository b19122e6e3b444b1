// The CDI hook of SMC-R claims end to end: the real erdma-cdi-hook (the static C program the
// runtime runs) against the agent's hook socket, with the handler standing in for the SMC-R pod
// setup. The hook hands over the container's state and prints the answer, and exits 0 whatever
// happens to the agent; the socket refuses what is not a request and survives a handler that
// throws.
#include "agent/dra/claim_hook_server.hpp"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <future>
#include <iterator>
#include <mutex>
#include <stdexcept>

#include "test/eventually.hpp"
#include "test/support.hpp"

namespace erdma::agent::dra {
namespace {
using namespace std::chrono_literals;
using erdma::testing::TempDir;

constexpr const char* kUid = "6f1c2a9e-0b7d-4c53-9a41-3e8b2d7f0c11";
constexpr const char* kState = R"({"ociVersion": "1.2.1", "id": "c0ffee", "status": "creating", "pid": 4242,
  "bundle": "/run/containerd/io.containerd.runtime.v2.task/k8s.io/c0ffee",
  "annotations": {"io.kubernetes.cri.sandbox-id": "5b1e", "io.kubernetes.cri.container-type": "container"}})";

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

struct Ran {
  int exit_code = -1;  // -1: still running at the limit (killed), or a signal
  std::string err;
};

// Runs the hook as a runtime would: `state` on stdin, stderr kept.
Ran run_hook(const TempDir& dir, const std::vector<std::string>& args, const std::string& state = kState) {
  dir.write("state.json", state);
  const std::string err_path = dir.file("hook.err");
  std::vector<std::string> argv = {ERDMA_CDI_HOOK};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> a;
  for (auto& s : argv) a.push_back(s.data());
  a.push_back(nullptr);
  char* env[] = {nullptr};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, dir.file("state.json").c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  const int spawned = ::posix_spawn(&pid, a[0], &fa, nullptr, a.data(), env);
  posix_spawn_file_actions_destroy(&fa);
  REQUIRE(spawned == 0);
  Ran out;
  int status = 0;
  if (!erdma::testing::eventually([&] { return ::waitpid(pid, &status, WNOHANG) == pid; }, 60s)) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  } else if (WIFEXITED(status)) {
    out.exit_code = WEXITSTATUS(status);
  }
  out.err = read_text(err_path);
  return out;
}

std::vector<std::string> hook_args(const std::string& socket, const std::string& uid = kUid) {
  return {"smcr", "--claim", uid, "--socket", socket};
}

// What the handler was asked, for the checks.
struct Seen {
  std::mutex mu;
  std::vector<HookRequest> requests;
  void add(const HookRequest& r) {
    std::lock_guard lock(mu);
    requests.push_back(r);
  }
  size_t size() {
    std::lock_guard lock(mu);
    return requests.size();
  }
};

// One raw exchange on the socket: the bytes sent, the answer read until the server closes.
std::string send_request(const std::string& socket, const std::string& bytes) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket.c_str(), sizeof addr.sun_path - 1);
  REQUIRE(::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size()));
  ::shutdown(fd, SHUT_WR);
  std::string answer;
  char buf[512];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) answer.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return answer;
}

}  // namespace

TEST_CASE("the hook hands the container's state to the agent and prints its answer; exit 0 either way") {
  TempDir dir("hook");
  Seen seen;
  bool ok = true;
  ClaimHookServer server(dir.file("hook.sock"), [&](const HookRequest& r, std::chrono::steady_clock::time_point) {
    seen.add(r);
    return ok ? ClaimHookOutcome{true, "Configured pod ml/bulk-0: eth0 -> ERDMA"}
              : ClaimHookOutcome{false, "NotAllowed pod ml/bulk-0: namespace ml is not in smcr.allowedNamespaces"};
  });
  REQUIRE_OK(server.start());

  const auto done = run_hook(dir, hook_args(server.socket_path()));
  CHECK(done.exit_code == 0);
  CHECK(done.err == "erdma-cdi-hook: claim " + std::string(kUid) + ": ok Configured pod ml/bulk-0: eth0 -> ERDMA\n");
  REQUIRE(seen.size() == 1);
  CHECK(seen.requests[0].claim_uid == kUid);
  CHECK(seen.requests[0].sandbox_id == "5b1e");
  CHECK(seen.requests[0].container_id == "c0ffee");
  CHECK(seen.requests[0].pid == 4242);
  CHECK(server.answered_ok() == 1);

  ok = false;
  const auto refused = run_hook(dir, hook_args(server.socket_path()));
  CHECK(refused.exit_code == 0);  // the container starts; its TCP stays TCP
  CHECK(refused.err.find(": error NotAllowed pod ml/bulk-0") != std::string::npos);
  CHECK(server.answered_error() == 1);
}

TEST_CASE("without the agent, or with an agent that does not answer, the container still starts") {
  TempDir dir("hook");
  const auto nobody = run_hook(dir, hook_args(dir.file("hook.sock")));
  CHECK(nobody.exit_code == 0);
  CHECK(nobody.err.find("not set up: cannot reach the agent at " + dir.file("hook.sock")) != std::string::npos);

  std::promise<void> release;
  auto released = release.get_future().share();
  Seen seen;
  ClaimHookServer server(dir.file("hook.sock"), [&](const HookRequest& r, std::chrono::steady_clock::time_point) {
    seen.add(r);
    released.wait();  // a setup stuck past the hook's patience
    return ClaimHookOutcome{true, "late"};
  });
  REQUIRE_OK(server.start());
  auto args = hook_args(server.socket_path());
  args.insert(args.end(), {"--timeout-ms", "300"});
  const auto waited = run_hook(dir, args);
  CHECK(waited.exit_code == 0);
  CHECK(waited.err.find("no answer: the agent did not answer in time") != std::string::npos);
  CHECK(seen.size() == 1);
  release.set_value();
  // The server goes on: the late answer met a closed connection, the next request is served.
  REQUIRE(erdma::testing::eventually([&] { return server.answered_ok() == 1; }));
  const auto next = run_hook(dir, hook_args(server.socket_path()));
  CHECK(next.exit_code == 0);
  CHECK(next.err.find(": ok late") != std::string::npos);
}

TEST_CASE("the hook refuses a command line that is not its own (exit 2) and a state it cannot send (exit 0)") {
  TempDir dir("hook");
  for (const auto& args :
       std::vector<std::vector<std::string>>{{},
                                             {"rdma", "--claim", kUid, "--socket", "/run/x.sock"},
                                             {"smcr", "--claim", kUid},
                                             {"smcr", "--claim", "", "--socket", "/run/x.sock"},
                                             {"smcr", "--claim", kUid, "--socket", "relative.sock"},
                                             {"smcr", "--claim", kUid, "--socket", "/run/x.sock", "--timeout-ms", "0"},
                                             {"smcr", "--claim", kUid, "--socket", "/run/x.sock", "--other", "1"},
                                             {"smcr", "--claim", kUid, "--socket", "/" + std::string(120, 's')}}) {
    const auto r = run_hook(dir, args);
    CAPTURE(r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("usage: erdma-cdi-hook smcr --claim UID --socket PATH") != std::string::npos);
  }
  const auto big = run_hook(dir, hook_args(dir.file("hook.sock")), std::string(kMaxHookRequestBytes, ' '));
  CHECK(big.exit_code == 0);
  CHECK(big.err.find("not set up: the OCI state on stdin is larger than the agent accepts") != std::string::npos);
}

TEST_CASE("the socket answers what is not a request with the reason, and a handler that throws costs one request") {
  TempDir dir("hook");
  bool fail = true;
  ClaimHookServer server(dir.file("hook.sock"), [&](const HookRequest&, std::chrono::steady_clock::time_point) {
    if (fail) throw std::runtime_error("boom");
    return ClaimHookOutcome{true, "Configured"};
  });
  REQUIRE_OK(server.start());
  CHECK(
      send_request(server.socket_path(), "GET / HTTP/1.1\r\n\r\n").rfind("error the header line \"GET / HTTP/1.1", 0) ==
      0);
  CHECK(
      send_request(server.socket_path(), "erdma-cdi-hook/1 smcr " + std::string(kUid) + "\n{\"annotations\": {}}") ==
      "error the runtime's OCI state for container \"\" names no pod sandbox (annotation io.kubernetes.cri.sandbox-id "
      "or io.kubernetes.cri-o.SandboxID): is the container started by a CRI runtime whose runtime passes "
      "annotations to hooks?\n");
  const std::string request = "erdma-cdi-hook/1 smcr " + std::string(kUid) + "\n" + kState;
  CHECK(send_request(server.socket_path(), request) == "error the agent failed on this request; its log says why\n");
  fail = false;
  CHECK(send_request(server.socket_path(), request) == "ok Configured\n");
  CHECK(server.answered_error() == 3);
  CHECK(server.answered_ok() == 1);
}

TEST_CASE("the socket is root's alone, replaces an old one, refuses anything else in its place, and goes at stop") {
  TempDir dir("hook");
  const std::string path = dir.file("hook.sock");
  auto handler = [](const HookRequest&, std::chrono::steady_clock::time_point) { return ClaimHookOutcome{true, ""}; };

  dir.write("hook.sock", "a file");
  ClaimHookServer blocked(path, handler);
  const auto refused = blocked.start();
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::FailedPrecondition);
  CHECK(refused.error().message.find(path + ": something that is not a socket is in the way") != std::string::npos);
  CHECK(read_text(path) == "a file");  // left as it was
  ::unlink(path.c_str());

  {  // an earlier agent's socket, left behind by a crash
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    REQUIRE(::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0);
    ::close(fd);
  }
  ClaimHookServer server(path, handler);
  REQUIRE_OK(server.start());
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  CHECK(S_ISSOCK(st.st_mode));
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(send_request(path, "erdma-cdi-hook/1 smcr " + std::string(kUid) + "\n" + kState) == "ok \n");
  server.stop();
  CHECK(::lstat(path.c_str(), &st) != 0);
  server.stop();  // idempotent

  ClaimHookServer too_long("/" + std::string(120, 'x'), handler);
  const auto long_path = too_long.start();
  REQUIRE_FALSE(long_path.ok());
  CHECK(long_path.error().code == ErrorCode::InvalidArgument);
}

}  // namespace erdma::agent::dra
