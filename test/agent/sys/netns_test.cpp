// The netns runner against real network namespaces this machine creates (needs root): work lands
// in the target namespace (interfaces, /proc/sys/net), the caller never changes namespace, and a
// namespace that vanishes is reported as NotFound.
#include "agent/sys/netns.hpp"

#include "agent/sys/dra_node_facts.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <memory>
#include <set>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <net/if.h>

#include "test/eventually.hpp"
#include "test/skip.hpp"
#include "test/support.hpp"

using namespace erdma;
using namespace erdma::agent;

namespace {

void require_root() {
  if (::geteuid() != 0) erdma::testing::skip_or_fail("needs root to create network namespaces");
  if (std::system("ip -V >/dev/null 2>&1") != 0) erdma::testing::skip_or_fail("needs the ip tool (iproute2)");
}

std::string unique(const char* prefix) {
  static int n = 0;
  return std::string(prefix) + std::to_string(::getpid() % 100000) + "-" + std::to_string(n++);
}

// A named namespace with one end of a veth pair inside; removed on scope exit.
struct TestNetns {
  std::string name = unique("erdma-nt-");
  std::string outer = "vo" + std::to_string(::getpid() % 100000);
  std::string inner = "vi" + std::to_string(::getpid() % 100000);
  TestNetns() {
    REQUIRE(std::system(("ip netns add " + name).c_str()) == 0);
    REQUIRE(std::system(("ip link add " + outer + " type veth peer name " + inner + " netns " + name).c_str()) == 0);
  }
  ~TestNetns() {
    std::system(("ip link del " + outer + " 2>/dev/null").c_str());
    std::system(("ip netns del " + name + " 2>/dev/null").c_str());
  }
  [[nodiscard]] NetnsRef ref() const { return NetnsRef::of_path("/var/run/netns/" + name); }
};

std::set<std::string> interfaces() {
  std::set<std::string> out;
  struct if_nameindex* list = if_nameindex();  // runs on the worker thread: no doctest asserts here
  if (list == nullptr) return out;
  for (struct if_nameindex* i = list; i->if_index != 0; ++i) out.insert(i->if_name);
  if_freenameindex(list);
  return out;
}

ino_t thread_netns_inode() {
  struct stat st {};
  REQUIRE(::stat("/proc/thread-self/ns/net", &st) == 0);
  return st.st_ino;
}

auto soon() { return std::chrono::steady_clock::now() + std::chrono::seconds(20); }

}  // namespace

TEST_CASE("work runs inside the namespace and sees its interfaces") {
  require_root();
  TestNetns ns;
  SetnsNetns runner;
  std::set<std::string> inside;
  const ino_t before = thread_netns_inode();
  auto st = runner.run(
      ns.ref(),
      [&] {
        inside = interfaces();
        return Status{};
      },
      soon());
  REQUIRE(st.ok());
  CHECK(inside == std::set<std::string>{"lo", ns.inner});
  auto outside = interfaces();
  CHECK(outside.count(ns.outer) == 1);
  CHECK(outside.count(ns.inner) == 0);
  CHECK(thread_netns_inode() == before);
}

// A pod's side of a DRA claim (dra_node_facts.hpp): what pod_interface_network reads inside a pod's
// namespace, here one with a veth end, before and after it has an address.
TEST_CASE("pod_interface_network: the namespace's interface, its address and MAC, read inside it") {
  require_root();
  TestNetns ns;
  SetnsNetns runner;
  auto read_inside = [&] {
    auto got = std::make_shared<Result<CardNetwork>>(make_error(ErrorCode::Internal, "not run"));
    REQUIRE(runner
                .run(
                    ns.ref(),
                    [got] {
                      *got = pod_interface_network();
                      return Status{};
                    },
                    soon())
                .ok());
    return *got;
  };
  auto none = read_inside();
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().code == ErrorCode::NotFound);

  const std::string in_ns = "ip netns exec " + ns.name + " ";
  REQUIRE(std::system((in_ns + "ip addr add 10.77.0.2/24 dev " + ns.inner).c_str()) == 0);
  REQUIRE(std::system((in_ns + "ip link set " + ns.inner + " up").c_str()) == 0);
  auto n = read_inside();
  REQUIRE(n.ok());
  CHECK(n->interface_name == ns.inner);
  CHECK(n->ips == std::vector<std::string>{"10.77.0.2/24"});
  // The MAC as the namespace's own sysfs shows it (ip netns exec mounts one).
  FILE* p = ::popen((in_ns + "cat /sys/class/net/" + ns.inner + "/address").c_str(), "r");
  REQUIRE(p != nullptr);
  char mac[64] = {};
  const bool got_mac = std::fgets(mac, sizeof mac, p) != nullptr;
  ::pclose(p);
  REQUIRE(got_mac);
  CHECK(n->hardware_address + "\n" == std::string(mac));
}

TEST_CASE("sysctl writes land in the namespace only") {
  require_root();
  TestNetns ns;
  SetnsNetns runner;
  auto host_before = read_sysctl("net.ipv4.tcp_syn_retries");
  REQUIRE(host_before.ok());
  const std::string want = *host_before == "3" ? "4" : "3";
  std::string seen_inside;
  auto st = runner.run(
      ns.ref(),
      [&]() -> Status {
        if (auto w = write_sysctl("net.ipv4.tcp_syn_retries", want); !w) return w;
        auto r = read_sysctl("net.ipv4.tcp_syn_retries");
        if (!r) return r.error();
        seen_inside = *r;
        return {};
      },
      soon());
  REQUIRE(st.ok());
  CHECK(seen_inside == want);
  CHECK(read_sysctl("net.ipv4.tcp_syn_retries").value() == *host_before);
  // A second visit sees the value kept by the namespace.
  std::string again;
  REQUIRE(runner
              .run(
                  ns.ref(),
                  [&] {
                    again = read_sysctl("net.ipv4.tcp_syn_retries").value();
                    return Status{};
                  },
                  soon())
              .ok());
  CHECK(again == want);
}

TEST_CASE("sysctl errors are named") {
  require_root();
  CHECK(write_sysctl("net.smc.no_such_knob_here", "1").error().code == ErrorCode::NotFound);
  CHECK(read_sysctl("net.ipv4.no_such_knob").error().code == ErrorCode::NotFound);
  CHECK(write_sysctl("net.ipv4.tcp_syn_retries", "not-a-number").error().code == ErrorCode::InvalidArgument);
}

TEST_CASE("a namespace given by pid is joined") {
  require_root();
  TestNetns ns;
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::execlp("ip", "ip", "netns", "exec", ns.name.c_str(), "sleep", "30", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Wait until the child has entered the namespace.
  auto target = NetnsRef::of_pid(child);
  REQUIRE(erdma::testing::eventually([&] {
    auto same = same_netns(target, ns.ref());
    return same.ok() && *same;
  }));
  SetnsNetns runner;
  std::set<std::string> inside;
  auto st = runner.run(
      target,
      [&] {
        inside = interfaces();
        return Status{};
      },
      soon());
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  REQUIRE(st.ok());
  CHECK(inside.count(ns.inner) == 1);
}

TEST_CASE("a vanished namespace is NotFound") {
  require_root();
  SetnsNetns runner;
  std::string name;
  {
    TestNetns ns;
    name = ns.name;
  }
  bool ran = false;
  auto st = runner.run(
      NetnsRef::of_path("/var/run/netns/" + name),
      [&] {
        ran = true;
        return Status{};
      },
      soon());
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == ErrorCode::NotFound);
  CHECK_FALSE(ran);

  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  auto gone = runner.run(
      NetnsRef::of_pid(child), [] { return Status{}; }, soon());
  REQUIRE_FALSE(gone.ok());
  CHECK(gone.error().code == ErrorCode::NotFound);
}

TEST_CASE("a path that is no network namespace is refused") {
  require_root();
  SetnsNetns runner;
  auto uts = runner.run(
      NetnsRef::of_path("/proc/self/ns/uts"), [] { return Status{}; }, soon());
  CHECK(uts.error().code == ErrorCode::InvalidArgument);
  auto file = runner.run(
      NetnsRef::of_path("/proc/self/status"), [] { return Status{}; }, soon());
  CHECK(file.error().code == ErrorCode::InvalidArgument);
}

TEST_CASE("work that overruns its deadline is abandoned, not waited for") {
  require_root();
  TestNetns ns;
  SetnsNetns runner;
  auto release = std::make_shared<std::atomic<bool>>(false);
  auto finished = std::make_shared<std::atomic<bool>>(false);
  auto st = runner.run(
      ns.ref(),
      [release, finished] {
        // The work under test: it runs past its deadline until released (at most 5 s).
        for (int i = 0; i < 500 && !release->load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        finished->store(true);
        return Status{};
      },
      std::chrono::steady_clock::now() + std::chrono::milliseconds(50));
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == ErrorCode::DeadlineExceeded);
  release->store(true);
  CHECK(erdma::testing::eventually([&] { return finished->load(); }));
}

TEST_CASE("same_netns tells namespaces apart") {
  require_root();
  TestNetns ns;
  CHECK(same_netns(NetnsRef::self(), NetnsRef::self()).value());
  CHECK_FALSE(same_netns(NetnsRef::self(), ns.ref()).value());
  CHECK(same_netns(NetnsRef::self(), NetnsRef::of_path("/nonexistent")).error().code == ErrorCode::NotFound);
}

// Review L2: what is checked is what is entered.
TEST_CASE("a namespace opened once is the one entered, even after its name names another") {
  require_root();
  TestNetns ns;
  auto opened = open_netns_once(ns.ref().path);
  REQUIRE_OK(opened);
  const NetnsRef pinned = *opened;
  const NetnsRef kept = pinned.by_identity();
  CHECK(kept.fd == nullptr);
  CHECK_FALSE(same_netns(pinned, NetnsRef::self()).value());
  // The name now names a fresh namespace (without the veth end).
  REQUIRE(std::system(("ip netns del " + ns.name + " && ip netns add " + ns.name).c_str()) == 0);
  SetnsNetns runner;
  std::set<std::string> inside;
  auto st = runner.run(
      pinned,
      [&] {
        inside = interfaces();
        return Status{};
      },
      soon());
  REQUIRE_OK(st);
  CHECK(inside.count(ns.inner) == 1);  // the namespace that was opened, kept alive by its descriptor
  auto again = runner.run(
      kept, [] { return Status{}; }, soon());
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().code == ErrorCode::NotFound);  // by path and identity: another namespace now
}

TEST_CASE("a process's namespace is opened through its /proc directory, never a later holder of its pid") {
  require_root();
  int gate[2];
  REQUIRE(::pipe(gate) == 0);
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    char c;
    ::close(gate[1]);
    while (::read(gate[0], &c, 1) < 0) {
    }
    ::_exit(0);
  }
  ::close(gate[0]);
  auto opened = open_process_netns("/proc", child, boot_ticks_now());
  REQUIRE_OK(opened);
  CHECK(opened->path == "/proc/" + std::to_string(child) + "/ns/net");
  CHECK(same_netns(*opened, NetnsRef::self()).value());
  // A process started after the runtime named the pid is not the sandbox's.
  auto late = open_process_netns("/proc", child, 0);
  REQUIRE_FALSE(late.ok());
  CHECK(late.error().code == ErrorCode::NotFound);
  // The kernel behaviour this relies on: a /proc/<pid> directory opened before the process exits
  // opens nothing afterwards, whoever gets the pid.
  const int dir = ::open(("/proc/" + std::to_string(child)).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  REQUIRE(dir >= 0);
  ::close(gate[1]);
  ::waitpid(child, nullptr, 0);
  const int stale = ::openat(dir, "ns/net", O_RDONLY | O_CLOEXEC);
  CHECK(stale < 0);
  if (stale >= 0) ::close(stale);
  ::close(dir);
  CHECK(open_process_netns("/proc", child, boot_ticks_now()).error().code == ErrorCode::NotFound);
}
