// The erdma-agent binary as kubelet sees it: started with a static config, registered with a
// fake kubelet, re-registering after a kubelet restart, and stopping cleanly on SIGTERM.
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test/agent/plugin/fake_kubelet.hpp"

namespace erdma::agent {
namespace {

using namespace std::chrono_literals;
using testing::count_health;
using testing::FakeKubelet;
using testing::TempDir;
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
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        exited_ = true;
        return st;
      }
      std::this_thread::sleep_for(10ms);
    }
    return -1;
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

}  // namespace

TEST_CASE("erdma-agent run: registers, serves, re-registers after a kubelet restart, exits 0 on SIGTERM") {
  TempDir dir;
  const std::string config = dir.path() + "/agent.yaml";
  {
    std::ofstream out(config);
    out << "devicePluginDir: " << dir.path() << "\n"
        << "slotsPerDevice: 8\n"
        << "metricsListen: 127.0.0.1:0\n"
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
  std::printf("measured: erdma-agent re-registered %lld ms after the simulated kubelet restart\n",
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
    REQUIRE_MESSAGE(status.ok(), status.error_message());
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

}  // namespace erdma::agent
