// The static device source (see static_rdma_devices.hpp).
#include "agent/sys/static_rdma_devices.hpp"

namespace erdma::agent {

Result<DeviceScan> StaticRdmaDevices::scan() {
  DeviceScan scan;
  scan.devices = devices_;
  if (devices_.empty()) scan.notes.push_back("no devices: devices.static is empty");
  return scan;
}

std::string StaticRdmaDevices::describe() const {
  return "static (" + std::to_string(devices_.size()) + (devices_.size() == 1 ? " device)" : " devices)");
}

}  // namespace erdma::agent
