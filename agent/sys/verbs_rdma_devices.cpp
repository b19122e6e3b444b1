// libibverbs device listing plus sysfs details (see verbs_rdma_devices.hpp).
#include "agent/sys/verbs_rdma_devices.hpp"
#include "common/text.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>

#include <infiniband/verbs.h>

namespace erdma::agent {
namespace {

struct DeviceListDeleter {
  void operator()(ibv_device** list) const noexcept { ibv_free_device_list(list); }
};
using DeviceList = std::unique_ptr<ibv_device*, DeviceListDeleter>;

}  // namespace

void filter_by_driver(DeviceScan& scan, const std::vector<std::string>& drivers) {
  std::vector<RdmaDevice> kept;
  for (auto& d : scan.devices) {
    if (std::find(drivers.begin(), drivers.end(), d.driver) != drivers.end()) {
      kept.push_back(std::move(d));
    } else if (d.driver.empty()) {
      scan.notes.push_back(d.name + " left out: its driver is unknown (wanted: " + common::join(drivers, ", ") + ")");
    } else {
      scan.notes.push_back(d.name + " left out: driver " + d.driver + " is not in devices.drivers (" +
                           common::join(drivers, ", ") + ")");
    }
  }
  scan.devices = std::move(kept);
}

void merge_kernel_info(RdmaDevice& device, const KernelDevice& kernel) {
  if (!kernel.driver.empty()) device.driver = kernel.driver;
  for (const auto& [port, netdev] : kernel.port_netdevs) {
    if (!netdev.empty()) {
      device.netdev = netdev;
      break;
    }
  }
}

bool netdev_in_other_netns(const std::string& sysfs_netdev, const KernelDevice& kernel) noexcept {
  if (sysfs_netdev.empty() || kernel.port_netdevs.empty()) return false;
  return std::all_of(kernel.port_netdevs.begin(), kernel.port_netdevs.end(),
                     [](const auto& port) { return port.second.empty(); });
}

VerbsRdmaDevices::VerbsRdmaDevices(std::vector<std::string> drivers, KernelDeviceInfo* kernel, std::string sysfs_root,
                                   std::string dev_dir)
    : drivers_(std::move(drivers)), kernel_(kernel), reader_(std::move(sysfs_root)), dev_dir_(std::move(dev_dir)) {}

std::string VerbsRdmaDevices::describe() const { return "verbs (drivers: " + common::join(drivers_, ", ") + ")"; }

Result<DeviceScan> VerbsRdmaDevices::scan() {
  DeviceScan out;
  std::error_code ec;
  out.rdma_cm_present = std::filesystem::exists(std::filesystem::path(dev_dir_) / "rdma_cm", ec);
  const std::string ib_class = reader_.root() + "/class/infiniband";
  if (!reader_.has_infiniband_class()) {
    out.notes.push_back("no RDMA devices found: " + ib_class +
                        " does not exist (no RDMA driver is loaded on this node; eRDMA needs the erdma kernel module)");
    return out;
  }

  errno = 0;
  int count = 0;
  DeviceList list(ibv_get_device_list(&count));
  if (!list) {
    const int err = errno;
    out.notes.push_back(std::string("no RDMA devices found: libibverbs cannot list devices: ") +
                        (err != 0 ? std::strerror(err) : "unknown error") +
                        (err == ENOSYS ? " (the kernel has no uverbs support)" : ""));
    return out;
  }
  std::vector<std::string> listed;
  std::map<std::string, std::string> verbs_uverbs;
  for (int i = 0; i < count; ++i) {
    ibv_device* dev = list.get()[i];
    const char* name = ibv_get_device_name(dev);
    if (name == nullptr) continue;
    listed.emplace_back(name);
    verbs_uverbs[name] = dev->dev_name;  // "uverbsN"
  }
  if (listed.empty()) {
    auto sysfs_names = reader_.device_names();
    std::string why = "no RDMA devices found: libibverbs lists none";
    if (sysfs_names && !sysfs_names->empty()) {
      why += " although " + ib_class + " has " + common::join(*sysfs_names, ", ") +
             " (is the rdma-core provider for its driver installed, and ib_uverbs loaded?)";
    } else {
      why += " and " + ib_class + " is empty";
    }
    out.notes.push_back(why);
    return out;
  }

  std::map<std::string, KernelDevice> kernel;
  if (kernel_ != nullptr) {
    if (auto k = kernel_->devices()) {
      for (auto& dev : *k) kernel[dev.name] = std::move(dev);
    } else {
      out.notes.push_back("kernel device query failed: " + k.error().message + "; using sysfs only");
    }
  }
  const auto sysfs_uverbs = reader_.uverbs_by_device();
  for (const auto& name : listed) {
    auto read = reader_.read_device(name, sysfs_uverbs);
    if (!read) {
      out.notes.push_back(name + " left out: " + read.error().message);
      continue;
    }
    RdmaDevice d = std::move(read->device);
    out.notes.insert(out.notes.end(), read->notes.begin(), read->notes.end());
    if (d.uverbs.empty()) d.uverbs = verbs_uverbs[name];
    if (auto it = kernel.find(name); it != kernel.end()) {
      if (netdev_in_other_netns(d.netdev, it->second)) {
        out.notes.push_back(name + " left out: its netdev " + d.netdev +
                            " is in another network namespace (a pod's own RDMA device, not one of this node's)");
        continue;
      }
      merge_kernel_info(d, it->second);
    }
    if (!d.uverbs.empty() && !std::filesystem::exists(std::filesystem::path(dev_dir_) / d.uverbs, ec)) {
      out.notes.push_back(name + ": " + dev_dir_ + "/" + d.uverbs +
                          " does not exist (is /dev/infiniband mounted into the agent?); marked unhealthy");
      d.uverbs.clear();
    }
    out.devices.push_back(std::move(d));
  }
  filter_by_driver(out, drivers_);
  if (out.devices.empty()) {
    out.notes.push_back("no RDMA devices found with driver " + common::join(drivers_, ", ") + " (libibverbs lists " +
                        common::join(listed, ", ") + ")");
  }
  return out;
}

}  // namespace erdma::agent
