// The agent's current view of its devices: the device plugin's scan loop writes it; the device
// plugin's gRPC handlers, SMC-R's host setup and the DRA driver read it. It outlives every gRPC
// server instance, so recreating the plugin socket after a kubelet restart loses nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "agent/core/plugin_model.hpp"
#include "agent/sys/rdma_devices.hpp"

namespace erdma::agent {

class DeviceState {
 public:
  struct Snapshot {
    std::vector<RdmaDevice> devices;
    Advertisement advertisement;
    bool rdma_cm_present = true;
    uint64_t generation = 0;  // bumped whenever `advertisement.slots` changes
  };

  explicit DeviceState(unsigned slots_per_device);

  // Replaces the view with a new scan. Returns true when the advertised slots (IDs, health or
  // NUMA node) changed; watchers are then called, on this thread, after the state is updated.
  bool update(const DeviceScan& scan);

  // The current view; never null. Thread-safe; the snapshot is immutable.
  [[nodiscard]] std::shared_ptr<const Snapshot> snapshot() const;
  [[nodiscard]] unsigned slots_per_device() const noexcept { return slots_per_device_; }

  // Watchers are called after each change. From another thread, remove_watcher() returns only
  // once no call to that watcher is running, so a watcher may be destroyed right after. A watcher
  // may remove itself (gRPC may finish a stream inline); watchers must be quick.
  uint64_t add_watcher(std::function<void()> watcher);
  void remove_watcher(uint64_t id);

 private:
  const unsigned slots_per_device_;
  mutable std::mutex mu_;
  std::shared_ptr<const Snapshot> snapshot_;
  std::recursive_mutex watchers_mu_;  // held while watchers run
  std::map<uint64_t, std::function<void()>> watchers_;
  uint64_t next_watcher_ = 1;
};

}  // namespace erdma::agent
