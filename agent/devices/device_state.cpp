// Device view shared between the scan loop and the gRPC handlers (see device_state.hpp).
#include "agent/devices/device_state.hpp"

namespace erdma::agent {

DeviceState::DeviceState(unsigned slots_per_device)
    : slots_per_device_(slots_per_device), snapshot_(std::make_shared<const Snapshot>()) {}

bool DeviceState::update(const DeviceScan& scan) {
  auto next = std::make_shared<Snapshot>();
  next->devices = scan.devices;
  next->advertisement = advertised_devices(scan.devices, slots_per_device_);
  next->rdma_cm_present = scan.rdma_cm_present;
  bool changed = false;
  {
    std::lock_guard lock(mu_);
    changed = next->advertisement.slots != snapshot_->advertisement.slots;
    next->generation = snapshot_->generation + (changed ? 1 : 0);
    snapshot_ = std::move(next);
  }
  if (changed) {
    std::lock_guard lock(watchers_mu_);
    std::vector<uint64_t> ids;
    for (const auto& [id, watcher] : watchers_) ids.push_back(id);
    for (uint64_t id : ids) {
      auto it = watchers_.find(id);
      if (it == watchers_.end()) continue;  // removed by an earlier watcher on this thread
      auto watcher = it->second;            // a copy: the entry may be erased while it runs
      watcher();
    }
  }
  return changed;
}

std::shared_ptr<const DeviceState::Snapshot> DeviceState::snapshot() const {
  std::lock_guard lock(mu_);
  return snapshot_;
}

uint64_t DeviceState::add_watcher(std::function<void()> watcher) {
  std::lock_guard lock(watchers_mu_);
  const uint64_t id = next_watcher_++;
  watchers_.emplace(id, std::move(watcher));
  return id;
}

void DeviceState::remove_watcher(uint64_t id) {
  std::lock_guard lock(watchers_mu_);
  watchers_.erase(id);
}

}  // namespace erdma::agent
