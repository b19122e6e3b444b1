#include "agent/core/host_setup.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

using namespace erdma;
using namespace erdma::agent;

namespace {
PnetEntry eth(const char* id, const char* dev) { return PnetEntry::eth(id, dev).value(); }
PnetEntry ib(const char* id, const char* dev, unsigned port) { return PnetEntry::ib(id, dev, port).value(); }
Ueid ueid(const char* s) { return Ueid::parse(s).value(); }
}  // namespace

TEST_CASE("host entries: an IB entry per port and an ETH entry per netdev") {
  auto id = PnetId::parse("ERDMA").value();
  auto got = host_pnet_entries(id, {{"erdma_0", 1, "eth0"}, {"erdma_1", 1, "eth1"}, {"erdma_0", 1, "eth0"}});
  REQUIRE(got.ok());
  std::vector<PnetEntry> want{eth("ERDMA", "eth0"), eth("ERDMA", "eth1"), ib("ERDMA", "erdma_0", 1),
                              ib("ERDMA", "erdma_1", 1)};
  CHECK(*got == want);
  auto no_netdev = host_pnet_entries(id, {{"erdma_0", 1, ""}});
  REQUIRE(no_netdev.ok());
  CHECK(no_netdev->size() == 1);
  auto bad = host_pnet_entries(id, {{"erdma_0", 3, "eth0"}});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("port 3") != std::string::npos);
}

TEST_CASE("plan on an empty host adds everything") {
  std::vector<PnetEntry> desired{eth("ERDMA", "eth0"), ib("ERDMA", "erdma_0", 1)};
  auto plan = plan_host_setup(desired, {}, ueid("ERDMA"), {});
  CHECK(plan.conflicts.empty());
  std::vector<SetupOp> want{AddEntry{eth("ERDMA", "eth0")}, AddEntry{ib("ERDMA", "erdma_0", 1)},
                            AddUeid{ueid("ERDMA")}};
  CHECK(plan.ops == want);
}

TEST_CASE("plan is empty when the host is already set up") {
  std::vector<PnetEntry> desired{eth("ERDMA", "eth0"), ib("ERDMA", "erdma_0", 1)};
  std::vector<PnetEntry> actual{ib("ERDMA", "erdma_0", 1), eth("ERDMA", "eth0"), eth("ADMIN", "eth9")};
  auto plan = plan_host_setup(desired, actual, ueid("ERDMA"), {ueid("OTHER"), ueid("ERDMA")});
  CHECK(plan.ops.empty());
  CHECK(plan.conflicts.empty());
}

TEST_CASE("plan adds only what is missing") {
  std::vector<PnetEntry> desired{eth("ERDMA", "eth0"), ib("ERDMA", "erdma_0", 1)};
  auto plan = plan_host_setup(desired, {eth("ERDMA", "eth0")}, std::nullopt, {});
  std::vector<SetupOp> want{AddEntry{ib("ERDMA", "erdma_0", 1)}};
  CHECK(plan.ops == want);
}

TEST_CASE("plan rebuilds our PNETID when a device went away") {
  std::vector<PnetEntry> desired{eth("ERDMA", "eth0"), ib("ERDMA", "erdma_0", 1)};
  std::vector<PnetEntry> actual{eth("ERDMA", "eth0"), ib("ERDMA", "erdma_0", 1), ib("ERDMA", "erdma_1", 1)};
  auto plan = plan_host_setup(desired, actual, std::nullopt, {});
  std::vector<SetupOp> want{RemovePnetId{PnetId::parse("ERDMA").value()}, AddEntry{eth("ERDMA", "eth0")},
                            AddEntry{ib("ERDMA", "erdma_0", 1)}};
  CHECK(plan.ops == want);
  CHECK(plan.conflicts.empty());
}

TEST_CASE("plan never touches a device mapped to another PNETID") {
  std::vector<PnetEntry> desired{eth("ERDMA", "eth0"), ib("ERDMA", "erdma_0", 1)};
  auto plan = plan_host_setup(desired, {ib("ADMIN", "erdma_0", 1)}, std::nullopt, {});
  std::vector<SetupOp> want{AddEntry{eth("ERDMA", "eth0")}};
  CHECK(plan.ops == want);
  REQUIRE(plan.conflicts.size() == 1);
  CHECK(plan.conflicts[0].find("erdma_0 port 1 is already mapped to PNETID ADMIN") != std::string::npos);
}

TEST_CASE("plan reports a full UEID table instead of failing later") {
  std::vector<Ueid> full{ueid("A"), ueid("B"), ueid("C"), ueid("D")};
  auto plan = plan_host_setup({}, {}, ueid("ERDMA"), full);
  CHECK(plan.ops.empty());
  REQUIRE(plan.conflicts.size() == 1);
  CHECK(plan.conflicts[0].find("UEID table is full") != std::string::npos);
}

TEST_CASE("plan with nothing desired changes nothing") {
  auto plan = plan_host_setup({}, {eth("ADMIN", "eth0")}, std::nullopt, {ueid("X")});
  CHECK(plan.ops.empty());
  CHECK(plan.conflicts.empty());
}

TEST_CASE("describe names each op") {
  CHECK(describe(AddEntry{eth("ERDMA", "eth0")}) == "add pnet entry ERDMA eth eth0");
  CHECK(describe(RemovePnetId{PnetId::parse("ERDMA").value()}) == "delete pnet entries of ERDMA");
  CHECK(describe(AddUeid{ueid("ERDMA")}) == "add UEID ERDMA");
}

TEST_CASE("smc sysctl names and values are checked") {
  CHECK(validate_smc_sysctl("net.smc.wmem", "1048576").ok());
  CHECK(validate_smc_sysctl("net.smc.tcp2smc", "1").ok());
  CHECK_FALSE(validate_smc_sysctl("net.ipv4.ip_forward", "1").ok());
  CHECK_FALSE(validate_smc_sysctl("net.smc.", "1").ok());
  CHECK_FALSE(validate_smc_sysctl("net.smc.../x", "1").ok());
  CHECK_FALSE(validate_smc_sysctl("net.smc.wmem", "").ok());
  CHECK_FALSE(validate_smc_sysctl("net.smc.wmem", "1;reboot").ok());
  CHECK_FALSE(validate_smc_sysctl("net.smc.wmem", std::string(65, '1')).ok());
  CHECK(sysctl_path("net.smc.wmem") == "/proc/sys/net/smc/wmem");
  CHECK(sysctl_path("net.smc.wmem", "/host/proc") == "/host/proc/sys/net/smc/wmem");
}

TEST_CASE("SMC-R ports of discovered devices: ports 1 and 2 with the device's netdev") {
  RdmaDevice a;
  a.name = "erdma_0";
  a.netdev = "eth0";
  a.ports = {RdmaPort{1, PortState::Active, "Ethernet", {}}};
  RdmaDevice b;
  b.name = "mlx5_0";
  b.ports = {RdmaPort{1, PortState::Down, "Ethernet", {}}, RdmaPort{2, PortState::Active, "Ethernet", {}},
             RdmaPort{3, PortState::Active, "Ethernet", {}}};
  std::vector<std::string> notes;
  const auto ports = smcr_ports_of({a, b}, &notes);
  REQUIRE(ports.size() == 3);
  CHECK(ports[0].ib_device == "erdma_0");
  CHECK(ports[0].netdev == "eth0");
  CHECK(ports[1].port == 1);
  CHECK(ports[2].port == 2);
  CHECK(ports[2].netdev.empty());
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].find("mlx5_0 port 3") != std::string::npos);
  CHECK(smcr_ports_of({}).empty());
}

TEST_CASE("SMC-D loopback switch: an entry only when turned off on a kernel that has the device") {
  auto on = smcd_loopback_entries(true, "lo");
  REQUIRE(on.ok());
  CHECK(on->empty());
  auto absent = smcd_loopback_entries(false, "");
  REQUIRE(absent.ok());
  CHECK(absent->empty());
  auto off = smcd_loopback_entries(false, "lo");
  REQUIRE(off.ok());
  CHECK(*off == std::vector<PnetEntry>{ib("ERDMANOSMCD", "lo", 1)});
  CHECK(smcd_off_pnet_id().str() == "ERDMANOSMCD");
  auto bad = smcd_loopback_entries(false, "has space");
  CHECK_FALSE(bad.ok());
}

TEST_CASE("plan deletes an owned PNETID nothing desires any more, and keeps it while desired") {
  const auto off = ib("ERDMANOSMCD", "lo", 1);
  const std::vector<PnetEntry> node{eth("ERDMA", "eth0"), ib("ERDMA", "erdma_0", 1)};
  std::vector<PnetEntry> with_off = node;
  with_off.push_back(off);
  // Turned back on: the entry goes, the node's entries stay.
  auto back_on = plan_host_setup(node, with_off, std::nullopt, {}, {smcd_off_pnet_id()});
  CHECK(back_on.ops == std::vector<SetupOp>{RemovePnetId{smcd_off_pnet_id()}});
  // Without `owned` it would stay forever: the PNETID is no longer among the desired ones.
  CHECK(plan_host_setup(node, with_off, std::nullopt, {}).ops.empty());
  // Off and present: nothing to do; off and missing: added.
  CHECK(plan_host_setup(with_off, with_off, std::nullopt, {}, {smcd_off_pnet_id()}).ops.empty());
  CHECK(plan_host_setup(with_off, node, std::nullopt, {}, {smcd_off_pnet_id()}).ops ==
        std::vector<SetupOp>{AddEntry{off}});
  // An administrator's PNETID on the device is a conflict, never replaced.
  auto admin = plan_host_setup(with_off, {ib("ADMIN", "lo", 1)}, std::nullopt, {}, {smcd_off_pnet_id()});
  REQUIRE(admin.conflicts.size() == 1);
  CHECK(admin.conflicts[0].find("lo") != std::string::npos);
  CHECK(std::find(admin.ops.begin(), admin.ops.end(), SetupOp{AddEntry{off}}) == admin.ops.end());
}
