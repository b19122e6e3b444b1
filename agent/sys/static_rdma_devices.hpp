// The static device source: serves the devices listed in the config (devices.static), for demos
// and tests on machines without RDMA.
#pragma once

#include <utility>
#include <vector>

#include "agent/sys/rdma_devices.hpp"

namespace erdma::agent {

class StaticRdmaDevices final : public RdmaDevices {
 public:
  explicit StaticRdmaDevices(std::vector<RdmaDevice> devices) : devices_(std::move(devices)) {}

  // RdmaDevices
  [[nodiscard]] Result<DeviceScan> scan() override;
  [[nodiscard]] std::string describe() const override;

 private:
  std::vector<RdmaDevice> devices_;
};

}  // namespace erdma::agent
