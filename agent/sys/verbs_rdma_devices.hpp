// The production device source: the devices libibverbs lists (the same view every verbs
// application on the node has), filtered by driver, with their details read from sysfs.
//
// Details come from sysfs rather than from ibv_open_device/ibv_query_port: opening a device
// creates a user context on it (erdma maps doorbell pages for each), which a periodic health scan
// should not do, and sysfs reads are what the unit tests replay from recorded trees.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "agent/sys/rdma_devices.hpp"
#include "agent/sys/sysfs_rdma.hpp"

namespace erdma::agent {

// What the kernel says about a device beyond sysfs: its driver (the only driver name software
// devices such as rxe have) and the netdev bound to each port (sysfs names netdevs only through
// RoCE GID entries, so an iWARP-mode erdma port has none there).
struct KernelDevice {
  std::string name;
  std::string driver;                            // "" when unknown
  std::map<unsigned, std::string> port_netdevs;  // port number -> netdev name
};

// Asked from RDMA netlink in production, replaced in tests.
class KernelDeviceInfo {
 public:
  virtual ~KernelDeviceInfo() = default;
  // One entry per device the kernel knows. Errors mean the query itself failed (e.g. no RDMA
  // netlink); the scan goes on with what sysfs says.
  [[nodiscard]] virtual Result<std::vector<KernelDevice>> devices() = 0;
};

// Folds what the kernel says into a device read from sysfs: the kernel's driver name wins over the
// bus driver link (which names e.g. "mlx5_core" rather than "mlx5"), the netdev of the lowest
// port that has one wins over a GID's netdev. Pure.
void merge_kernel_info(RdmaDevice& device, const KernelDevice& kernel);

// True when the device's netdev lives in another network namespace than the one asking: the
// kernel answers RDMA netlink's port query with a netdev only when that netdev is in the asking
// socket's netns, so ports without one while sysfs names a netdev (`sysfs_netdev`) mean the
// netdev is elsewhere: a pod's own RDMA device (a per-pod eRDMA device, or Soft-RoCE made inside
// the pod's netns), which is not a device of this node. False when the kernel reported no port.
// Pure.
[[nodiscard]] bool netdev_in_other_netns(const std::string& sysfs_netdev, const KernelDevice& kernel) noexcept;

class VerbsRdmaDevices final : public RdmaDevices {
 public:
  // `drivers`: which devices to keep (by driver name). `sysfs_root` and `dev_dir` are "/sys" and
  // "/dev/infiniband" on a node. `kernel` may be null (sysfs only).
  VerbsRdmaDevices(std::vector<std::string> drivers, KernelDeviceInfo* kernel, std::string sysfs_root = "/sys",
                   std::string dev_dir = "/dev/infiniband");

  // RdmaDevices
  [[nodiscard]] Result<DeviceScan> scan() override;
  [[nodiscard]] std::string describe() const override;

 private:
  std::vector<std::string> drivers_;
  KernelDeviceInfo* kernel_;
  sysfs::SysfsRdmaReader reader_;
  std::string dev_dir_;
};

// Keeps the devices whose driver is listed; notes the others. Pure: shared by the verbs source
// and tests. A device with an unknown driver ("") is left out with a note saying so.
void filter_by_driver(DeviceScan& scan, const std::vector<std::string>& drivers);

}  // namespace erdma::agent
