// Discovery on real RDMA hardware (or Soft-RoCE): lists devices through libibverbs, sysfs and
// RDMA netlink and checks what it finds. Exits 77 (ctest: skipped) with the reason when the
// machine has no RDMA device; the qemu VM test runs it with a real rxe device.
#include <cstdio>
#include <filesystem>

#include "agent/core/plugin_model.hpp"
#include "agent/sys/rdma_netlink.hpp"
#include "agent/sys/verbs_rdma_devices.hpp"

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
    std::printf("SKIP: no RDMA device on this machine:");
    for (const auto& n : scan->notes) std::printf(" %s;", n.c_str());
    std::printf("\n");
    return 77;
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
  }
  return failures == 0 ? 0 : 1;
}
