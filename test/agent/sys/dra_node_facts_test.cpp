// The DRA slices' node facts: a card's PCI address and PCIe root from its sysfs device link, IPv4
// addresses from the interface list.
#include "agent/sys/dra_node_facts.hpp"

#include <doctest/doctest.h>

#include "test/fakes/fake_sysfs.hpp"

namespace erdma::agent {
namespace {
using testing::FakeSysfs;
}

TEST_CASE("pci_addresses: the device link's last part when it is a PCI function, else a note") {
  FakeSysfs sys;
  sys.symlink("../../../devices/pci0000:00/0000:00:05.0", "class/infiniband/erdma_0/device");
  sys.symlink("../../../devices/virtual/net/eth9", "class/infiniband/rxe_0/device");
  sys.dir("class/infiniband/erdma_2");  // no device link at all
  std::vector<std::string> notes;
  auto got = sysfs::pci_addresses(sys.root(), {"erdma_0", "rxe_0", "erdma_2"}, notes);
  CHECK(got == std::map<std::string, std::string>{{"erdma_0", "0000:00:05.0"}});
  REQUIRE(notes.size() == 2);
  CHECK(notes[0].find("rxe_0: no PCI address") == 0);
  CHECK(notes[0].find("not a PCI function") != std::string::npos);
  CHECK(notes[1].find("erdma_2: no PCI address") == 0);
}

TEST_CASE("pcie_roots: the root complex of the resolved device link, through the card's own symlink") {
  FakeSysfs sys;
  // As sysfs lays it out: the class entry is a symlink into /sys/devices, and the card's device
  // link is relative to where that symlink points, not to class/infiniband.
  sys.dir("devices/pci0000:00/0000:00:05.0/infiniband/erdma_0");
  sys.symlink("../../devices/pci0000:00/0000:00:05.0/infiniband/erdma_0", "class/infiniband/erdma_0");
  sys.symlink("../../../0000:00:05.0", "devices/pci0000:00/0000:00:05.0/infiniband/erdma_0/device");
  // Behind a bridge, on another root complex.
  sys.dir("devices/pci0000:80/0000:80:01.0/0000:81:00.0/infiniband/erdma_1");
  sys.symlink("../../devices/pci0000:80/0000:80:01.0/0000:81:00.0/infiniband/erdma_1", "class/infiniband/erdma_1");
  sys.symlink("../../../0000:81:00.0", "devices/pci0000:80/0000:80:01.0/0000:81:00.0/infiniband/erdma_1/device");
  // A software device over a virtual netdev, and a card without a device link.
  sys.dir("devices/virtual/net/eth9");
  sys.symlink("../../../devices/virtual/net/eth9", "class/infiniband/rxe_0/device");
  sys.dir("class/infiniband/erdma_2");
  std::vector<std::string> notes;
  auto got = sysfs::pcie_roots(sys.root(), {"erdma_0", "erdma_1", "rxe_0", "erdma_2"}, notes);
  CHECK(got == std::map<std::string, std::string>{{"erdma_0", "pci0000:00"}, {"erdma_1", "pci0000:80"}});
  REQUIRE(notes.size() == 2);
  CHECK(notes[0].find("rxe_0: no PCIe root") == 0);
  CHECK(notes[0].find("not under a PCI root complex") != std::string::npos);
  CHECK(notes[1].find("erdma_2: no PCIe root") == 0);

  // pci_addresses, which reads only the link's last part, agrees on the same tree.
  std::vector<std::string> pci_notes;
  CHECK(sysfs::pci_addresses(sys.root(), {"erdma_0", "erdma_1"}, pci_notes) ==
        std::map<std::string, std::string>{{"erdma_0", "0000:00:05.0"}, {"erdma_1", "0000:81:00.0"}});
  CHECK(pci_notes.empty());
}

TEST_CASE("pcie_roots: a sysfs root that does not exist gives one note and nothing else") {
  std::vector<std::string> notes;
  CHECK(sysfs::pcie_roots("/nonexistent-sysfs-root", {"erdma_0"}, notes).empty());
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].find("no PCIe roots") == 0);
}

TEST_CASE("ipv4_by_netdev: the loopback interface has 127.0.0.1") {
  std::vector<std::string> notes;
  auto got = ipv4_by_netdev(notes);
  CHECK(notes.empty());
  REQUIRE(got.count("lo") == 1);
  CHECK(got.at("lo") == "127.0.0.1");
}

TEST_CASE("card_networks: the netdev's addresses as CIDR and its MAC; cards without a netdev are absent") {
  FakeSysfs sys;
  sys.file("class/net/lo/address", "00:00:00:00:00:00\n");
  RdmaDevice on_lo;
  on_lo.name = "erdma_0";
  on_lo.netdev = "lo";
  RdmaDevice no_netdev;
  no_netdev.name = "erdma_1";
  auto got = card_networks({on_lo, no_netdev}, sys.root());
  REQUIRE(got.size() == 1);
  const auto& n = got.at("erdma_0");
  CHECK(n.interface_name == "lo");
  REQUIRE_FALSE(n.ips.empty());
  CHECK(n.ips.front() == "127.0.0.1/8");
  CHECK(n.hardware_address == "00:00:00:00:00:00");
}

TEST_CASE("pick_pod_interface: eth0 when it has an address, else the first other interface but lo") {
  using V4 = std::map<std::string, std::vector<std::string>>;
  CHECK(pick_pod_interface(V4{{"lo", {"127.0.0.1/8"}}, {"eth0", {"10.89.1.5/24"}}, {"a0", {"10.1.0.2/16"}}}) == "eth0");
  CHECK(pick_pod_interface(V4{{"lo", {"127.0.0.1/8"}}, {"net1", {"10.1.0.2/16"}}, {"net0", {"10.2.0.2/16"}}}) ==
        "net0");
  CHECK(pick_pod_interface(V4{{"lo", {"127.0.0.1/8"}}, {"eth0", {}}, {"net1", {"10.1.0.2/16"}}}) == "net1");
  CHECK_FALSE(pick_pod_interface(V4{{"lo", {"127.0.0.1/8"}}}).has_value());
  CHECK_FALSE(pick_pod_interface(V4{}).has_value());
}

}  // namespace erdma::agent
