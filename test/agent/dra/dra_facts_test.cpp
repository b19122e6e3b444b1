// The DRA slices' node facts: the node's name from config or environment, and the facts built
// from the driver's state, the config and what sysfs and the interface list gave.
#include "agent/dra/dra_facts.hpp"

#include <doctest/doctest.h>

#include <cstdlib>

#include "test/fakes/fake_sysfs.hpp"

namespace erdma::agent {

TEST_CASE("dra_node_name: the config's, else NODE_NAME, else an error saying how to set it") {
  DraConfig dra;
  ::unsetenv("NODE_NAME");
  auto none = dra_node_name(dra);
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().code == ErrorCode::FailedPrecondition);
  CHECK(none.error().message.find("spec.nodeName") != std::string::npos);
  ::setenv("NODE_NAME", "Bad_Name", 1);
  auto bad = dra_node_name(dra);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == ErrorCode::InvalidArgument);
  CHECK(bad.error().message.rfind("NODE_NAME \"Bad_Name\" is not a node name (a DNS-1123 subdomain): it has the "
                                  "upper-case 'B' (character 1); ",
                                  0) == 0);
  // A node name is a DNS-1123 subdomain with no 63-character limit per label, as the apiserver
  // checks it; until the validator was shared, such a NODE_NAME kept the DRA driver from starting.
  const std::string long_label = std::string(64, 'n') + ".zone-a";
  ::setenv("NODE_NAME", long_label.c_str(), 1);
  auto long_ok = dra_node_name(dra);
  REQUIRE(long_ok.ok());
  CHECK(*long_ok == long_label);
  ::setenv("NODE_NAME", "node-7", 1);
  CHECK(*dra_node_name(dra) == "node-7");
  dra.node_name = "node-1";
  CHECK(*dra_node_name(dra) == "node-1");
  ::unsetenv("NODE_NAME");
}

TEST_CASE("slice_facts: driver mode found, SMC-R verdict, health policy, sharing, addresses") {
  AgentConfig cfg;
  cfg.dra.health = DraHealthPolicy::Omit;
  cfg.dra.slots_per_device = 8;
  DriverFacts driver;
  driver.erdma_loaded = true;
  driver.compat_mode = false;
  driver.smc_loaded = true;
  driver.erdma_version = "1.4.3";
  auto f = slice_facts(cfg, "node-1", "uid-1", driver, DriverMode::Default, {{"erdma_0", "0000:00:05.0"}},
                       {{"erdma_0", "pci0000:00"}}, {{"eth0", "10.0.0.5"}});
  CHECK(f.node_name == "node-1");
  CHECK(f.node_uid == "uid-1");
  CHECK(f.driver == "erdma.aliyun.com");
  CHECK(f.driver_mode == "default");
  CHECK(f.smcr_capable);
  CHECK(f.driver_version == "1.4.3");
  CHECK(f.health == HealthPolicy::Omit);
  CHECK(f.shared_slots == 8);
  CHECK(f.pci_addresses.at("erdma_0") == "0000:00:05.0");
  CHECK(f.pcie_roots.at("erdma_0") == "pci0000:00");
  CHECK(f.ipv4_addresses.at("eth0") == "10.0.0.5");

  DriverFacts no_module;  // erdma not loaded: no driverMode attribute, and no SMC-R
  auto g = slice_facts(cfg, "node-1", "", no_module, DriverMode::Default, {}, {}, {});
  CHECK(g.driver_mode.empty());
  CHECK_FALSE(g.smcr_capable);
}

TEST_CASE("read_slice_facts: PCI address and root from the links under the sysfs root, module state from it") {
  testing::FakeSysfs sys;
  sys.dir("devices/pci0000:00/0000:00:06.0");
  sys.symlink("../../../devices/pci0000:00/0000:00:06.0", "class/infiniband/erdma_0/device");
  sys.file("module/erdma/version", "2.0.1\n");
  AgentConfig cfg;
  RdmaDevice card;
  card.name = "erdma_0";
  std::vector<std::string> notes;
  auto f = read_slice_facts(cfg, "node-1", "", {card}, sys.root(), notes);
  CHECK(f.pci_addresses.at("erdma_0") == "0000:00:06.0");
  CHECK(f.pcie_roots.at("erdma_0") == "pci0000:00");
  CHECK(f.driver_mode == "default");
  CHECK(f.driver_version == "2.0.1");
  CHECK(f.ipv4_addresses.count("lo") == 1);
}

}  // namespace erdma::agent
