// The erdma-agent binary as kubelet sees it: started with a static config, registered with a
// fake kubelet, re-registering after a kubelet restart, and stopping cleanly on SIGTERM.
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include "agent/core/driver_mode.hpp"
#include "agent/sys/kernel_modules.hpp"
#include "agent/sys/netlink_smc.hpp"
#include "test/eventually.hpp"
#include "test/fakes/fake_kubelet.hpp"
#include "test/fakes/fake_pod_apis.hpp"
#include "test/skip.hpp"
#include "test/support.hpp"

namespace erdma::agent {
namespace {

using namespace std::chrono_literals;
using erdma::testing::eventually;
using erdma::testing::TempDir;
using testing::count_health;
using testing::FakeKubelet;
using testing::WatchStream;

constexpr auto kWait = 15s;

// A child process that is always reaped: SIGKILL on destruction if still running.
class Child {
 public:
  Child(const std::string& bin, const std::vector<std::string>& args) {
    // Built before fork: the child of a multi-threaded process may only exec (no malloc).
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(bin.c_str()));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::execv(bin.c_str(), argv.data());
      ::_exit(127);
    }
  }
  ~Child() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      int st = 0;
      ::waitpid(pid_, &st, 0);
    }
  }
  // Waits (bounded) for the exit; returns the wait status or -1 on timeout.
  int wait_exit(std::chrono::milliseconds timeout) {
    int st = 0;
    if (!eventually([&] { return ::waitpid(pid_, &st, WNOHANG) == pid_; }, timeout)) return -1;
    exited_ = true;
    return st;
  }
  [[nodiscard]] pid_t pid() const noexcept { return pid_; }

 private:
  pid_t pid_ = -1;
  bool exited_ = false;
};

long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

// A TCP port that was free a moment ago (the agent binds it right after).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  ::close(fd);
  return ntohs(a.sin_port);
}

// GET http://127.0.0.1:port/path (HTTP/1.0, bounded by a receive timeout); "" on failure.
std::string http_get(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    const std::string req = "GET " + path + " HTTP/1.0\r\n\r\n";
    if (::write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[4096];
      for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  return out;
}

// The value of one series in a Prometheus text exposition, -1 when absent.
double series(const std::string& text, const std::string& name_and_labels) {
  const auto at = text.find("\n" + name_and_labels + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + name_and_labels.size() + 2));
}

}  // namespace

TEST_CASE("erdma-agent run: registers, serves, re-registers after a kubelet restart, exits 0 on SIGTERM") {
  TempDir dir;
  const std::string config = dir.path() + "/agent.yaml";
  {
    std::ofstream out(config);
    out << "devicePluginDir: " << dir.path() << "\n"
        << "slotsPerDevice: 8\n"
        << "metricsListen: 127.0.0.1:0\n"
        << "smcr: {enabled: false}  # device plugin only: never touch this host's SMC tables\n"
        << "devices:\n"
        << "  source: static\n"
        << "  static:\n"
        << "  - {name: erdma_0, uverbs: uverbs0, netdev: eth0, numaNode: 0}\n"
        << "  - {name: erdma_1, uverbs: uverbs1, netdev: eth1, state: DOWN, numaNode: 1}\n";
  }
  FakeKubelet kubelet(dir.path());
  kubelet.start();
  Child agent(ERDMA_AGENT_BIN, {"run", "--config", config});

  auto req = kubelet.wait_for_registrations(1, kWait);
  REQUIRE(req.has_value());
  CHECK(req->version() == "v1beta1");
  CHECK(req->endpoint() == "erdma.sock");
  CHECK(req->resource_name() == "aliyun/erdma");
  CHECK(req->options().pre_start_required());

  {
    auto stub = kubelet.plugin(req->endpoint());
    WatchStream watch(*stub);
    auto r = watch.next(kWait);
    REQUIRE(r.has_value());
    CHECK(r->devices_size() == 16);
    CHECK(count_health(*r, "erdma_0", "Healthy") == 8);
    CHECK(count_health(*r, "erdma_1", "Unhealthy") == 8);
  }
  std::printf("measured: erdma-agent run (static source, 2 devices, idle) VmRSS %ld KiB\n", rss_kib(agent.pid()));

  const auto restarted = std::chrono::steady_clock::now();
  kubelet.restart();
  REQUIRE(kubelet.wait_for_registrations(2, kWait).has_value());
  std::printf(
      "measured: erdma-agent re-registered %lld ms after the simulated kubelet restart\n",
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(kubelet.registration_time(2) - restarted).count()));
  {
    auto stub = kubelet.plugin("erdma.sock");
    v1beta1::AllocateRequest areq;
    areq.add_container_requests()->add_devices_ids("erdma_0-7");
    v1beta1::AllocateResponse aresp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kWait);
    const auto status = stub->Allocate(&ctx, areq, &aresp);
    REQUIRE_OK(status);
    CHECK(aresp.container_responses(0).envs().at("ERDMA_DEVICES") == "erdma_0");
  }
  std::printf("measured: erdma-agent VmRSS after 1 restart and Allocate %ld KiB\n", rss_kib(agent.pid()));

  REQUIRE(::kill(agent.pid(), SIGTERM) == 0);
  const int st = agent.wait_exit(kWait);
  REQUIRE(st != -1);
  CHECK(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
  CHECK_FALSE(std::filesystem::exists(dir.path() + "/erdma.sock"));
}

TEST_CASE("erdma-agent run: an invalid config is refused with exit status 2") {
  TempDir dir;
  const std::string config = dir.path() + "/agent.yaml";
  {
    std::ofstream out(config);
    out << "devicePluginDir: " << dir.path() << "\nslotsPerDevise: 8\n";
  }
  Child agent(ERDMA_AGENT_BIN, {"run", "--config", config});
  const int st = agent.wait_exit(kWait);
  REQUIRE(st != -1);
  CHECK(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 2);
  CHECK_FALSE(std::filesystem::exists(dir.path() + "/erdma.sock"));
}

TEST_CASE("erdma-agent run with SMC-R on a kernel without SMC: the plugin serves and containers start") {
  if (NetlinkPnetTable::open().ok()) {
    // Where the kernel has SMC this would change the host's pnet table; the VM test covers it.
    erdma::testing::skip_test("this kernel has SMC: the agent would change the host's SMC tables");
  }
  TempDir dir;
  testing::FakePodResourcesServer podres(dir.path() + "/podres.sock");
  testing::FakeCriServer cri(dir.path() + "/cri.sock");
  std::filesystem::create_directories(dir.path() + "/proc/1/ns");
  std::filesystem::create_symlink("/proc/self/ns/net", dir.path() + "/proc/1/ns/net");
  const std::string pod_netns = dir.path() + "/pod-netns";  // not a namespace: entering it fails
  std::ofstream(pod_netns) << "";
  podres.add("team", "web-0", "app", "aliyun/erdma", {"erdma_0-3"});
  testing::FakeSandbox sb;
  sb.id = "sb-web-0";
  sb.ns = "team";
  sb.name = "web-0";
  sb.annotations["network.alibabacloud.com/erdma-smcr"] = "true";
  sb.netns_path = pod_netns;
  cri.add(sb);

  const int port = free_port();
  const std::string config = dir.path() + "/agent.yaml";
  {
    std::ofstream out(config);
    out << "devicePluginDir: " << dir.path() << "\n"
        << "slotsPerDevice: 4\n"
        << "metricsListen: 127.0.0.1:" << port << "\n"
        << "podResourcesSocket: " << dir.path() << "/podres.sock\n"
        << "criSocket: " << dir.path() << "/cri.sock\n"
        << "procRoot: " << dir.path() << "/proc\n"
        << "smcr:\n"
        << "  preloadSource: " << SMC_PRELOAD_SO << "\n"
        << "  preloadHostDir: " << dir.path() << "/lib\n"
        << "devices:\n"
        << "  source: static\n"
        << "  static:\n"
        << "  - {name: erdma_0, uverbs: uverbs0, netdev: eth0}\n";
  }
  FakeKubelet kubelet(dir.path());
  kubelet.start();
  Child agent(ERDMA_AGENT_BIN, {"run", "--config", config});
  // Two resources register, in either order: the eRDMA devices and the SMC-R library resource.
  auto first = kubelet.wait_for_registrations(1, kWait);
  auto second = kubelet.wait_for_registrations(2, kWait);
  REQUIRE(first.has_value());
  REQUIRE(second.has_value());
  const auto& req = first->resource_name() == "aliyun/erdma" ? first : second;
  const auto& smcr_req = first->resource_name() == "aliyun/erdma" ? second : first;
  CHECK(req->resource_name() == "aliyun/erdma");
  CHECK(smcr_req->resource_name() == "aliyun/erdma-smcr");
  CHECK(smcr_req->endpoint() == "erdma-smcr.sock");

  auto stub = kubelet.plugin(req->endpoint());
  v1beta1::PreStartContainerRequest pre;
  pre.add_devices_ids("erdma_0-3");
  v1beta1::PreStartContainerResponse pre_resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 30s);  // kubelet's budget
  const auto status = stub->PreStartContainer(&ctx, pre, &pre_resp);
  CHECK_OK(status);            // the container starts; SMC falls back to TCP
  CHECK(podres.calls() == 2);  // the resync at start (which pods hold the resource) and PreStartContainer
  CHECK(cri.status_calls() >= 1);

  // The pod setup failed (the "netns" is a plain file) and is counted twice: once for the
  // resync at start, once for PreStartContainer. The host setup fails (no SMC) and is counted;
  // the library was installed.
  std::string metrics;
  CHECK(eventually(
      [&] {
        metrics = http_get(port, "/metrics");
        return series(metrics, "erdma_agent_smcr_host_setups_total{result=\"error\"}") >= 1 &&
               series(metrics, "erdma_agent_smcr_pod_setups_total{result=\"failed\"}") >= 2;
      },
      kWait));
  CHECK(series(metrics, "erdma_agent_smcr_pod_setups_total{result=\"failed\"}") == 2);
  CHECK(series(metrics, "erdma_agent_smcr_pod_setups_total{result=\"configured\"}") == 0);
  CHECK(series(metrics, "erdma_agent_smcr_host_setups_total{result=\"error\"}") >= 1);
  CHECK(series(metrics, "erdma_agent_preload_installs_total{result=\"installed\"}") == 1);
  CHECK(series(metrics, "erdma_agent_pre_start_total{result=\"ok\"}") == 1);
  CHECK(std::filesystem::file_size(dir.path() + "/lib/libsmc-preload.so") ==
        std::filesystem::file_size(SMC_PRELOAD_SO));

  REQUIRE(::kill(agent.pid(), SIGTERM) == 0);
  const int st = agent.wait_exit(kWait);
  REQUIRE(st != -1);
  CHECK(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
}

TEST_CASE("erdma-agent run --load-modules: modprobe runs for what the node lacks, once") {
  // What this host's /sys lacks decides what the agent asks for; nothing to load, nothing to see.
  const auto want = plan_module_loads(judge_driver(DriverMode::Default, read_driver_facts("/sys")));
  if (want.empty()) erdma::testing::skip_test("this host already has every module the agent would load");
  TempDir dir;
  const std::string calls = dir.path() + "/modprobe-calls";
  const std::string modprobe = dir.path() + "/modprobe";
  {
    std::ofstream out(modprobe);
    out << "#!/bin/sh\necho \"$@\" >> " << calls << "\nexit 0\n";
  }
  std::filesystem::permissions(modprobe, std::filesystem::perms::owner_all);
  const std::string config = dir.path() + "/agent.yaml";
  const int port = free_port();
  {
    std::ofstream out(config);
    // A rescan every second: the node report runs on the same period as the device scans counted
    // in erdma_agent_scans_total, which the test waits on instead of a fixed sleep.
    out << "devicePluginDir: " << dir.path() << "\n"
        << "metricsListen: 127.0.0.1:" << port << "\n"
        << "smcr: {enabled: false}\n"
        << "driver: {modprobe: " << modprobe << "}\n"
        << "devices:\n  source: static\n  rescanSeconds: 1\n  static:\n  - {name: erdma_0, uverbs: uverbs0}\n";
  }
  FakeKubelet kubelet(dir.path());
  kubelet.start();
  Child agent(ERDMA_AGENT_BIN, {"run", "--config", config, "--load-modules"});
  REQUIRE(kubelet.wait_for_registrations(1, kWait).has_value());
  std::string got;
  CHECK(eventually(
      [&] {
        std::ifstream in(calls);
        std::string line;
        got.clear();
        while (std::getline(in, line)) got += line + "\n";
        return !got.empty();
      },
      kWait));
  std::string expected;
  for (const auto& m : want) expected += "-- " + m + "\n";
  CAPTURE(got);
  // The fake loads nothing, so /sys stays as it was: the second round asks for nothing new and a
  // rescan never retries (each module once per run).
  // Three more periods of the agent's loop (its node report runs once per period, like the scan):
  // none of them asks modprobe again.
  auto scans = [&] { return series(http_get(port, "/metrics"), "erdma_agent_scans_total{result=\"ok\"}"); };
  const double first = scans();
  REQUIRE(eventually([&] { return scans() >= first + 3; }, kWait));
  std::ifstream again(calls);
  std::string all((std::istreambuf_iterator<char>(again)), std::istreambuf_iterator<char>());
  CHECK(all == expected);
  ::kill(agent.pid(), SIGTERM);
  CHECK(agent.wait_exit(kWait) == 0);
}

}  // namespace erdma::agent
