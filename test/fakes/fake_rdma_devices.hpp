// In-memory RdmaDevices for tests: holds a device list that tests change at will (flip a port's
// state, add or remove devices) and can be told to fail the next N scans. Thread-safe.
#pragma once

#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "agent/sys/rdma_devices.hpp"

namespace erdma::agent::testing {

// A device with one Ethernet port in `state`.
inline RdmaDevice make_device(std::string name, std::string uverbs, int numa, PortState state = PortState::Active,
                              std::string netdev = "eth0") {
  RdmaDevice d;
  d.name = std::move(name);
  d.driver = "erdma";
  d.uverbs = std::move(uverbs);
  d.netdev = std::move(netdev);
  d.numa_node = numa;
  d.ports.push_back(RdmaPort{1, state, "Ethernet", {}});
  return d;
}

class FakeRdmaDevices final : public RdmaDevices {
 public:
  explicit FakeRdmaDevices(std::vector<RdmaDevice> devices = {}) : devices_(std::move(devices)) {}

  Result<DeviceScan> scan() override {
    std::lock_guard lock(mu_);
    ++scans_;
    if (fail_next_ > 0) {
      --fail_next_;
      return make_error(ErrorCode::Unavailable, "fake discovery failure");
    }
    DeviceScan s;
    s.devices = devices_;
    s.rdma_cm_present = rdma_cm_present_;
    return s;
  }
  std::string describe() const override { return "fake"; }

  void set_devices(std::vector<RdmaDevice> devices) {
    std::lock_guard lock(mu_);
    devices_ = std::move(devices);
  }
  // Sets every port of `name` to `state`; returns false when there is no such device.
  bool set_port_state(const std::string& name, PortState state) {
    std::lock_guard lock(mu_);
    for (auto& d : devices_) {
      if (d.name != name) continue;
      for (auto& p : d.ports) p.state = state;
      return true;
    }
    return false;
  }
  void set_rdma_cm_present(bool present) {
    std::lock_guard lock(mu_);
    rdma_cm_present_ = present;
  }
  void fail_next(int n) {
    std::lock_guard lock(mu_);
    fail_next_ = n;
  }
  int scans() const {
    std::lock_guard lock(mu_);
    return scans_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<RdmaDevice> devices_;
  bool rdma_cm_present_ = true;
  int fail_next_ = 0;
  int scans_ = 0;
};

}  // namespace erdma::agent::testing
