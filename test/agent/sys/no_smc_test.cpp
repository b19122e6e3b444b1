// On a kernel without SMC (like the CI host), every SMC client fails with one clear message.
// Skipped where the kernel has SMC: the VM covers that side.
#include "agent/sys/netlink_smc.hpp"

#include <doctest/doctest.h>

#include "../skip.hpp"

using namespace erdma;
using namespace erdma::agent;

namespace {
void require_no_smc() {
  auto t = NetlinkPnetTable::open();
  if (t.ok()) testing::skip_test("this kernel has SMC; the no-SMC path is checked where it has none");
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
