// Discovery on real RDMA hardware (or Soft-RoCE): lists devices through libibverbs, sysfs and
// RDMA netlink and checks what it finds. Skipped with the reason (test/skip.hpp: exit 77, under
// CI=true too, since no install step provides hardware) when the machine has no RDMA device;
// test/cluster/vm-nodes.sh runs it on a VM worker node's Soft-RoCE rxe0 and checks its output.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "agent/core/plugin_model.hpp"
#include "agent/sys/rdma_netlink.hpp"
#include "agent/sys/verbs_rdma_devices.hpp"
#include "test/skip.hpp"

int main() {
  using namespace erdma::agent;
  NetlinkDeviceInfo kernel;
  VerbsRdmaDevices verbs({"erdma", "rxe", "siw", "mlx5"}, &kernel);
  auto scan = verbs.scan();
  if (!scan) {
    std::printf("FAIL: discovery failed: %s\n", scan.error().message.c_str());
    return 1;
  }
  if (scan->devices.empty()) {
    std::string why = "no RDMA device on this machine:";
    for (const auto& n : scan->notes) why += " " + n + ";";
    erdma::testing::skip_test(why.c_str());
  }
  int failures = 0;
  for (const auto& d : scan->devices) {
    std::printf("device %s driver=%s uverbs=%s netdev=%s numa=%d ports=%zu healthy=%d\n", d.name.c_str(),
                d.driver.c_str(), d.uverbs.c_str(), d.netdev.c_str(), d.numa_node, d.ports.size(), is_healthy(d));
    auto fail = [&](const char* what) {
      std::printf("FAIL: %s: %s\n", d.name.c_str(), what);
      ++failures;
    };
    if (d.driver.empty()) fail("no driver name (RDMA netlink lookup)");
    if (d.netdev.empty()) fail("no netdev");
    if (d.uverbs.empty() || !std::filesystem::exists(uverbs_path(d))) fail("no uverbs char device");
    if (d.ports.empty()) fail("no ports");
    for (const auto& p : d.ports) {
      if (p.state == PortState::Unknown) fail("port state unknown");
      if (p.link_layer.empty()) fail("no link layer");
    }
    if (!check_device_name_fits(d.name, 64)) fail("name too long for slot IDs");
    // NCCL's GID index as Allocate would set it: its sysfs entry must really be an IPv4-mapped
    // RoCE v2 GID. A netdev without an IPv4 address has none; that is reported, not failed.
    if (const auto index = ipv4_roce_v2_gid_index(d)) {
      const std::string port = "/sys/class/infiniband/" + d.name + "/ports/" + std::to_string(d.ports.front().number);
      std::ifstream gid(port + "/gids/" + std::to_string(*index));
      std::ifstream type(port + "/gid_attrs/types/" + std::to_string(*index));
      std::string g, t;
      std::getline(gid, g);
      std::getline(type, t);
      std::printf("device %s NCCL_IB_GID_INDEX=%u (gid %s, %s)\n", d.name.c_str(), *index, g.c_str(), t.c_str());
      if (!is_ipv4_mapped_gid(g) || t != "RoCE v2") fail("chosen GID index is not an IPv4 RoCE v2 entry");
    } else {
      std::printf("device %s: no IPv4 RoCE v2 GID (no IPv4 address on %s?)\n", d.name.c_str(), d.netdev.c_str());
    }
  }
  return failures == 0 ? 0 : 1;
}
