// sysfs parsing: the pure parsers, and the reader against recorded trees in testdata/sysfs.
#include "agent/sys/sysfs_rdma.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <unistd.h>

#include "agent/sys/static_rdma_devices.hpp"
#include "agent/sys/verbs_rdma_devices.hpp"
#include "test/fakes/fake_rdma_devices.hpp"
#include "test/support.hpp"

namespace erdma::agent {
namespace {

std::string tree(const char* name) { return std::string(ERDMA_SOURCE_DIR) + "/test/agent/testdata/sysfs/" + name; }

bool has_note(const std::vector<std::string>& notes, const std::string& part) {
  for (const auto& n : notes) {
    if (n.find(part) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("sysfs port state") {
  struct Case {
    const char* text;
    std::optional<PortState> want;
  };
  for (const auto& c : std::vector<Case>{{"4: ACTIVE\n", PortState::Active},
                                         {"1: DOWN", PortState::Down},
                                         {"2: INIT\n", PortState::Init},
                                         {"3: ARMED\n", PortState::Armed},
                                         {"5: ACTIVE_DEFER\n", PortState::ActiveDefer},
                                         {"0: NOP\n", PortState::Unknown},
                                         {"4: DOWN\n", std::nullopt},
                                         {"ACTIVE\n", std::nullopt},
                                         {"9: ACTIVE\n", std::nullopt},
                                         {"", std::nullopt},
                                         {"4:ACTIVE", PortState::Active},
                                         {"-4: ACTIVE", std::nullopt}}) {
    CAPTURE(c.text);
    auto r = sysfs::parse_port_state(c.text);
    REQUIRE(r.ok() == c.want.has_value());
    if (c.want) CHECK(*r == *c.want);
  }
}

TEST_CASE("sysfs numa_node, GID, GID type") {
  CHECK(*sysfs::parse_numa_node("0\n") == 0);
  CHECK(*sysfs::parse_numa_node("3") == 3);
  CHECK(*sysfs::parse_numa_node("-1\n") == -1);
  CHECK_FALSE(sysfs::parse_numa_node("-2").ok());
  CHECK_FALSE(sysfs::parse_numa_node("x").ok());
  CHECK_FALSE(sysfs::parse_numa_node("").ok());

  CHECK(*sysfs::parse_gid("fe80:0000:0000:0000:0216:3eff:fe12:3456\n") == "fe80:0000:0000:0000:0216:3eff:fe12:3456");
  CHECK_FALSE(sysfs::parse_gid("fe80::1").ok());
  CHECK_FALSE(sysfs::parse_gid("fe80:0000:0000:0000:0216:3eff:fe12:345g").ok());
  CHECK_FALSE(sysfs::parse_gid("fe80-0000:0000:0000:0216:3eff:fe12:3456").ok());
  CHECK(sysfs::is_zero_gid("0000:0000:0000:0000:0000:0000:0000:0000"));
  CHECK_FALSE(sysfs::is_zero_gid("0000:0000:0000:0000:0000:ffff:0a00:0005"));

  CHECK(*sysfs::parse_gid_type("RoCE v2\n") == GidType::RoceV2);
  CHECK(*sysfs::parse_gid_type("IB/RoCE v1\n") == GidType::IbRoceV1);
  CHECK_FALSE(sysfs::parse_gid_type("RoCE v3").ok());
}

TEST_CASE("recorded tree: two erdma devices and an InfiniBand device") {
  sysfs::SysfsRdmaReader reader(tree("erdma-node"));
  REQUIRE(reader.has_infiniband_class());
  auto names = reader.device_names();
  REQUIRE(names.ok());
  CHECK(*names == std::vector<std::string>{"erdma_0", "erdma_1", "mlx5_0"});
  const auto uverbs = reader.uverbs_by_device();
  CHECK(uverbs ==
        std::map<std::string, std::string>{{"erdma_0", "uverbs0"}, {"erdma_1", "uverbs1"}, {"mlx5_0", "uverbs2"}});

  auto e0 = reader.read_device("erdma_0", uverbs);
  REQUIRE(e0.ok());
  CHECK(e0->notes.empty());
  const RdmaDevice& d0 = e0->device;
  CHECK(d0.name == "erdma_0");
  CHECK(d0.driver == "erdma");
  CHECK(d0.uverbs == "uverbs0");
  CHECK(d0.netdev == "eth0");
  CHECK(d0.numa_node == 0);
  REQUIRE(d0.ports.size() == 1);
  CHECK(d0.ports[0].number == 1);
  CHECK(d0.ports[0].state == PortState::Active);
  CHECK(d0.ports[0].link_layer == "Ethernet");
  REQUIRE(d0.ports[0].gids.size() == 2);  // the all-zero entry is left out
  CHECK(d0.ports[0].gids[0] == Gid{0, "fe80:0000:0000:0000:0216:3eff:fe12:3456", GidType::RoceV2, "eth0"});
  CHECK(d0.ports[0].gids[1] == Gid{1, "0000:0000:0000:0000:0000:ffff:0a00:0005", GidType::RoceV2, "eth0"});
  CHECK(is_healthy(d0));

  auto e1 = reader.read_device("erdma_1", uverbs);
  REQUIRE(e1.ok());
  CHECK(e1->device.numa_node == 1);
  CHECK(e1->device.netdev == "eth1");
  CHECK(e1->device.ports[0].state == PortState::Down);
  CHECK_FALSE(is_healthy(e1->device));

  auto m = reader.read_device("mlx5_0", uverbs);
  REQUIRE(m.ok());
  CHECK(m->device.driver == "mlx5_core");
  CHECK(m->device.numa_node == -1);
  CHECK(m->device.ports[0].link_layer == "InfiniBand");
  CHECK(m->device.ports[0].gids[0].type == GidType::IbRoceV1);
  CHECK(m->device.netdev.empty());

  auto missing = reader.read_device("erdma_9", uverbs);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == ErrorCode::NotFound);
  CHECK_FALSE(reader.read_device("../erdma_0", uverbs).ok());
}

TEST_CASE("recorded tree: a Soft-RoCE device has no bus driver but names its netdev") {
  sysfs::SysfsRdmaReader reader(tree("rxe-node"));
  auto r = reader.read_device("rxe0", reader.uverbs_by_device());
  REQUIRE(r.ok());
  CHECK(r->device.driver.empty());  // RDMA netlink supplies "rxe" on a live node
  CHECK(r->device.uverbs == "uverbs0");
  CHECK(r->device.netdev == "veth0");
  CHECK(r->device.numa_node == -1);
  CHECK(is_healthy(r->device));
  CHECK(r->device.ports[0].gids.size() == 2);
}

TEST_CASE("captured tree: Soft-RoCE rxe0 and rxe1 from the VM test") {
  // Recorded by test/vm/scenario.sh from Debian's 6.12 kernel: rxe0 on veth0 (10.99.0.1) and rxe1
  // on veth1 (10.99.0.2), each with a link-local and an IPv4-mapped RoCE v2 GID.
  sysfs::SysfsRdmaReader reader(tree("rxe-vm"));
  const auto uverbs = reader.uverbs_by_device();
  struct Want {
    const char* name;
    const char* uverbs;
    const char* netdev;
    const char* ipv4_gid;
  };
  for (const auto& w : {Want{"rxe0", "uverbs0", "veth0", "0000:0000:0000:0000:0000:ffff:0a63:0001"},
                        Want{"rxe1", "uverbs1", "veth1", "0000:0000:0000:0000:0000:ffff:0a63:0002"}}) {
    CAPTURE(w.name);
    auto r = reader.read_device(w.name, uverbs);
    REQUIRE(r.ok());
    const RdmaDevice& d = r->device;
    CHECK(d.uverbs == w.uverbs);
    CHECK(d.netdev == w.netdev);
    CHECK(d.numa_node == -1);
    REQUIRE(d.ports.size() == 1);
    CHECK(d.ports[0].state == PortState::Active);
    CHECK(d.ports[0].link_layer == "Ethernet");
    REQUIRE(d.ports[0].gids.size() == 2);
    CHECK(d.ports[0].gids[0].address.rfind("fe80:", 0) == 0);
    CHECK(d.ports[0].gids[1].address == w.ipv4_gid);
    for (const auto& g : d.ports[0].gids) {
      CHECK(g.type == GidType::RoceV2);
      CHECK(g.netdev == w.netdev);
    }
    CHECK(is_healthy(d));
  }
}

TEST_CASE("recorded tree: malformed contents become notes, never a lost device") {
  sysfs::SysfsRdmaReader reader(tree("malformed-node"));
  const auto uverbs = reader.uverbs_by_device();
  auto r = reader.read_device("erdma_0", uverbs);
  REQUIRE(r.ok());
  const RdmaDevice& d = r->device;
  CHECK(d.numa_node == -1);
  REQUIRE(d.ports.size() == 2);  // "garbage" is not a port
  CHECK(d.ports[0].state == PortState::Unknown);
  CHECK(d.ports[1].state == PortState::Unknown);
  REQUIRE(d.ports[0].gids.size() == 1);
  CHECK(d.ports[0].gids[0].index == 1);
  CHECK(d.ports[0].gids[0].type == GidType::Unknown);
  CHECK_FALSE(is_healthy(d));
  CHECK(has_note(r->notes, "numa_node"));
  CHECK(has_note(r->notes, "erdma_0 port 1: port state"));
  CHECK(has_note(r->notes, "erdma_0 port 2"));
  CHECK(has_note(r->notes, "gid 0"));

  auto empty = reader.read_device("erdma_1", uverbs);
  REQUIRE(empty.ok());
  CHECK(empty->device.ports.empty());
  CHECK(empty->device.uverbs.empty());
  CHECK(has_note(empty->notes, "no ports"));
  CHECK_FALSE(is_healthy(empty->device));
}

TEST_CASE("verbs source on a node without RDMA says so and why") {
  const std::string root = std::string(ERDMA_SOURCE_DIR) + "/test/agent/testdata/sysfs/no-such-root";
  VerbsRdmaDevices verbs({"erdma"}, nullptr, root, "/nonexistent/dev/infiniband");
  auto scan = verbs.scan();
  REQUIRE(scan.ok());
  CHECK(scan->devices.empty());
  CHECK_FALSE(scan->rdma_cm_present);
  REQUIRE(scan->notes.size() == 1);
  CHECK(scan->notes[0].find("no RDMA devices found") == 0);
  CHECK(scan->notes[0].find(root + "/class/infiniband does not exist") != std::string::npos);
  CHECK(verbs.describe() == "verbs (drivers: erdma)");
}

TEST_CASE("filter_by_driver keeps the configured drivers and notes the rest") {
  DeviceScan scan;
  scan.devices = {testing::make_device("erdma_0", "uverbs0", 0), testing::make_device("mlx5_0", "uverbs1", 0),
                  testing::make_device("x0", "uverbs2", 0)};
  scan.devices[1].driver = "mlx5";
  scan.devices[2].driver = "";
  filter_by_driver(scan, {"erdma", "rxe"});
  REQUIRE(scan.devices.size() == 1);
  CHECK(scan.devices[0].name == "erdma_0");
  CHECK(has_note(scan.notes, "mlx5_0 left out: driver mlx5 is not in devices.drivers (erdma, rxe)"));
  CHECK(has_note(scan.notes, "x0 left out: its driver is unknown"));
}

TEST_CASE("static source serves the configured list") {
  StaticRdmaDevices none({});
  auto s0 = none.scan();
  REQUIRE(s0.ok());
  CHECK(s0->devices.empty());
  CHECK(has_note(s0->notes, "devices.static is empty"));
  StaticRdmaDevices two({testing::make_device("a", "uverbs0", 0), testing::make_device("b", "uverbs1", 1)});
  auto s = two.scan();
  REQUIRE(s.ok());
  CHECK(s->devices.size() == 2);
  CHECK(s->rdma_cm_present);
  CHECK(two.describe() == "static (2 devices)");
}

TEST_CASE("the SMC-D loopback device is the virtual one under class/dibs") {
  namespace fs = std::filesystem;
  const erdma::testing::TempDir tmp("dibs");
  const fs::path root = fs::path(tmp.path()) / "sys";
  CHECK(sysfs::SysfsRdmaReader(root.string()).smcd_loopback_device().empty());  // no sysfs at all
  fs::create_directories(root / "class/dibs");
  CHECK(sysfs::SysfsRdmaReader(root.string()).smcd_loopback_device().empty());  // the class, no device
  // A hardware ISM device hangs off its bus: not the loopback.
  fs::create_directory_symlink("../../devices/pci0000:00/0000:00:05.0/dibs/ism0", root / "class/dibs/ism0");
  CHECK(sysfs::SysfsRdmaReader(root.string()).smcd_loopback_device().empty());
  fs::create_directory_symlink("../../devices/virtual/dibs/lo", root / "class/dibs/lo");
  CHECK(sysfs::SysfsRdmaReader(root.string()).smcd_loopback_device() == "lo");
}

}  // namespace erdma::agent
