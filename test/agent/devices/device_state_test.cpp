// DeviceState: generations, change detection, watchers that come and go.
#include "agent/devices/device_state.hpp"

#include <doctest/doctest.h>

#include "test/fakes/fake_rdma_devices.hpp"

namespace erdma::agent {

TEST_CASE("DeviceState bumps the generation only when the advertised slots change") {
  DeviceState state(2);
  CHECK(state.snapshot()->generation == 0);
  DeviceScan scan;
  scan.devices = {testing::make_device("erdma_0", "uverbs0", 0)};
  int calls = 0;
  const auto id = state.add_watcher([&] { ++calls; });
  CHECK(state.update(scan));
  CHECK(state.snapshot()->generation == 1);
  CHECK(state.snapshot()->advertisement.slots.size() == 2);
  CHECK_FALSE(state.update(scan));  // same view
  scan.rdma_cm_present = false;     // not advertised: no new generation, but kept
  CHECK_FALSE(state.update(scan));
  CHECK_FALSE(state.snapshot()->rdma_cm_present);
  scan.devices[0].ports[0].state = PortState::Down;
  CHECK(state.update(scan));
  CHECK(state.snapshot()->generation == 2);
  CHECK(calls == 2);
  state.remove_watcher(id);
  scan.devices[0].ports[0].state = PortState::Active;
  CHECK(state.update(scan));
  CHECK(calls == 2);
}

TEST_CASE("a watcher may remove itself and others while being notified") {
  DeviceState state(1);
  int a = 0, b = 0;
  uint64_t id_a = 0, id_b = 0;
  id_a = state.add_watcher([&] {
    ++a;
    state.remove_watcher(id_a);
    state.remove_watcher(id_b);
  });
  id_b = state.add_watcher([&] { ++b; });
  DeviceScan scan;
  scan.devices = {testing::make_device("erdma_0", "uverbs0", 0)};
  CHECK(state.update(scan));
  CHECK(a == 1);
  CHECK(b == 0);  // removed before its turn
  scan.devices.clear();
  CHECK(state.update(scan));
  CHECK(a == 1);
}

}  // namespace erdma::agent
