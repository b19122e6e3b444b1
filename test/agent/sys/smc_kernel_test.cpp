// The kernel clients against a real SMC kernel (needs-kernel): the PnetTable contract in the initial
// netns and in a fresh netns, UEIDs, and every SMC_GEN_NETLINK and sock_diag query decoding what the
// kernel really sends. These rewrite the kernel's pnet table, so besides SMC they need
// ERDMA_KERNEL_TESTS=1 (the VM test sets it); elsewhere they are skipped.
#include "agent/sys/netlink_smc.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <unistd.h>

#include "agent/sys/netns.hpp"
#include "pnet_table_contract.hpp"
#include "test/skip.hpp"
#include "test/support.hpp"

using namespace erdma;
using namespace erdma::agent;

namespace {

void require_kernel() {
  const char* allowed = std::getenv("ERDMA_KERNEL_TESTS");
  if (!allowed || std::string(allowed) != "1") {
    erdma::testing::skip_test("set ERDMA_KERNEL_TESTS=1 to let this test rewrite the kernel's SMC tables");
  }
  if (::geteuid() != 0) erdma::testing::skip_or_fail("needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN)");
  auto t = NetlinkPnetTable::open();
  if (!t.ok() && t.error().code == ErrorCode::Unavailable) erdma::testing::skip_test(t.error().message.c_str());
  REQUIRE_OK(t);
}

std::chrono::steady_clock::time_point soon() { return std::chrono::steady_clock::now() + std::chrono::seconds(20); }

}  // namespace

TEST_CASE("kernel pnet table keeps the contract in the initial netns") {
  require_kernel();
  auto t = NetlinkPnetTable::open();
  REQUIRE(t.ok());
  agent::testing::check_pnet_table_contract(**t, true);
}

TEST_CASE("kernel pnet table keeps the contract in a fresh netns") {
  require_kernel();
  const std::string name = "erdma-kt-" + std::to_string(::getpid());
  REQUIRE(std::system(("ip netns add " + name).c_str()) == 0);
  SetnsNetns netns;
  auto st = netns.run(
      NetnsRef::of_path("/var/run/netns/" + name),
      []() -> Status {
        auto t = NetlinkPnetTable::open();  // opened inside: the socket belongs to the fresh netns
        if (!t) return t.error();
        try {
          agent::testing::check_pnet_table_contract(**t, false);
        } catch (...) {  // a failed REQUIRE on this worker thread; doctest has recorded it
          return make_error(ErrorCode::Internal, "contract failed in the fresh netns");
        }
        return {};
      },
      soon());
  CHECK(st.ok());
  CHECK(std::system(("ip netns del " + name).c_str()) == 0);
}

TEST_CASE("kernel UEID table adds, lists and removes") {
  require_kernel();
  auto info = NetlinkSmcInfo::open();
  REQUIRE(info.ok());
  const auto u = Ueid::parse("ERDMA-CONTRACT-TEST").value();
  auto add = (*info)->add_ueid(u);
  REQUIRE(add.ok());
  auto again = (*info)->add_ueid(u);
  REQUIRE(again.ok());
  CHECK(*again == Change::Unchanged);
  auto list = (*info)->ueids();
  REQUIRE(list.ok());
  CHECK(std::find(list->begin(), list->end(), u) != list->end());
  auto rm = (*info)->remove_ueid(u);
  REQUIRE(rm.ok());
  CHECK(*rm == Change::Changed);
  auto rm_again = (*info)->remove_ueid(u);
  REQUIRE(rm_again.ok());
  CHECK(*rm_again == Change::Unchanged);
}

TEST_CASE("kernel SMC_GEN_NETLINK and sock_diag replies decode") {
  require_kernel();
  auto info = NetlinkSmcInfo::open();
  REQUIRE(info.ok());
  auto sys = (*info)->system_info();
  REQUIRE(sys.ok());
  CHECK(sys->version >= 1);
  CHECK((*info)->stats().ok());
  CHECK((*info)->fallback_stats().ok());
  CHECK((*info)->link_groups().ok());
  auto status = SockDiagSmcStatus::open();
  REQUIRE(status.ok());
  CHECK((*status)->sockets().ok());
}
