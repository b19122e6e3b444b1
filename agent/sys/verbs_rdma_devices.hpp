// The production device source: the devices libibverbs lists (the same view every verbs
// application on the node has), filtered by driver, with their details read from sysfs.
//
// Details come from sysfs rather than from ibv_open_device/ibv_query_port: opening a device
// creates a user context on it (erdma maps doorbell pages for each), which a periodic health scan
// should not do, and sysfs reads are what the unit tests replay from recorded trees.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "agent/sys/rdma_devices.hpp"
#include "agent/sys/sysfs_rdma.hpp"

namespace erdma::agent {

// The driver of a device that has no bus driver link (software devices such as rxe): asked from
// RDMA netlink in production, replaced in tests.
class DriverLookup {
 public:
  virtual ~DriverLookup() = default;
  // ib device name -> driver name ("rxe", "erdma"); missing entries are unknown. Errors mean the
  // lookup itself failed (e.g. no RDMA netlink); the scan goes on with what sysfs says.
  [[nodiscard]] virtual Result<std::vector<std::pair<std::string, std::string>>> drivers() = 0;
};

class VerbsRdmaDevices final : public RdmaDevices {
 public:
  // `drivers`: which devices to keep (by driver name). `sysfs_root` and `dev_dir` are "/sys" and
  // "/dev/infiniband" on a node. `lookup` may be null (no driver lookup beyond sysfs).
  VerbsRdmaDevices(std::vector<std::string> drivers, DriverLookup* lookup, std::string sysfs_root = "/sys",
                   std::string dev_dir = "/dev/infiniband");

  // RdmaDevices
  [[nodiscard]] Result<DeviceScan> scan() override;
  [[nodiscard]] std::string describe() const override;

 private:
  std::vector<std::string> drivers_;
  DriverLookup* lookup_;
  sysfs::SysfsRdmaReader reader_;
  std::string dev_dir_;
};

// Keeps the devices whose driver is listed; notes the others. Pure: shared by the verbs source
// and tests. A device with an unknown driver ("") is left out with a note saying so.
void filter_by_driver(DeviceScan& scan, const std::vector<std::string>& drivers);

}  // namespace erdma::agent
