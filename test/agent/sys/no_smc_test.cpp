// On a kernel without SMC (like the CI host), every SMC client, and every erdma-agent command
// built on them, fails with one clear message.
// Skipped where the kernel has SMC: the VM covers that side.
#include "agent/sys/netlink_smc.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test/skip.hpp"
#include "test/support.hpp"

using namespace erdma;
using namespace erdma::agent;

namespace {
void require_no_smc() {
  auto t = NetlinkPnetTable::open();
  if (t.ok()) erdma::testing::skip_test("this kernel has SMC; the no-SMC path is checked where it has none");
}
}  // namespace

TEST_CASE("pnet table without SMC says the module is not loaded") {
  require_no_smc();
  auto t = NetlinkPnetTable::open();
  REQUIRE_FALSE(t.ok());
  CHECK(t.error().code == ErrorCode::Unavailable);
  CHECK(t.error().message == "the kernel has no SMC (module smc not loaded)");
}

TEST_CASE("SMC_GEN_NETLINK without SMC says the module is not loaded") {
  require_no_smc();
  auto i = NetlinkSmcInfo::open();
  REQUIRE_FALSE(i.ok());
  CHECK(i.error().code == ErrorCode::Unavailable);
  CHECK(i.error().message == "the kernel has no SMC (module smc not loaded)");
}

TEST_CASE("sock_diag without SMC says the module is not loaded") {
  require_no_smc();
  auto s = SockDiagSmcStatus::open();
  REQUIRE(s.ok());  // NETLINK_SOCK_DIAG itself exists everywhere
  auto socks = (*s)->sockets();
  REQUIRE_FALSE(socks.ok());
  CHECK(socks.error().code == ErrorCode::Unavailable);
  CHECK(socks.error().message.find("the kernel has no SMC") == 0);
}

TEST_CASE("erdma-agent pnet, ueid, smc-status and smc-stats say so and how to fix it in one line and exit 1") {
  require_no_smc();
  const erdma::testing::TempDir dir("nosmc");
  const std::string out = dir.file("out.txt");
  struct Case {
    const char* args;
    const char* line;  // how the line starts; the fix follows on the same line
    const char* fix;
  };
  const char* smc = "error: the kernel has no SMC (module smc not loaded): load the kernel module smc on the node";
  const char* diag =
      "error: the kernel has no SMC (module smc_diag not loaded): load the kernel modules smc and smc_diag";
  const Case cases[] = {
      {"pnet list", smc, "`modprobe smc`"},
      {"pnet list --netns /proc/self/ns/net", smc, "`modprobe smc`"},
      {"pnet add ERDMA --eth eth0", smc, "`modprobe smc`"},
      {"ueid list", smc, "`modprobe smc`"},
      {"smc-stats", smc, "`modprobe smc`"},
      {"smc-status", diag, "`modprobe smc smc_diag`"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.args);
    // Bounded by timeout(1); stdout and stderr together, so "one line" means one line in all.
    const std::string cmd = std::string("timeout 20 ") + ERDMA_AGENT_BIN + " " + c.args + " > " + out + " 2>&1";
    const int st = std::system(cmd.c_str());
    REQUIRE(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 1);
    std::ifstream f(out);
    const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    CHECK(text.rfind(c.line, 0) == 0);
    CHECK(text.find(c.fix) != std::string::npos);
    CHECK(text.find("the node's administrator") != std::string::npos);
    CHECK(text.find('\n') == text.size() - 1);
  }
}
