// Where the agent's devices come from. Implementations: VerbsRdmaDevices (libibverbs + sysfs,
// production), StaticRdmaDevices (the config's list, for demos), fakes in test/fakes/.
#pragma once

#include <string>
#include <vector>

#include "agent/core/rdma_device.hpp"
#include "common/result.hpp"

namespace erdma::agent {

struct DeviceScan {
  std::vector<RdmaDevice> devices;  // the devices the agent should advertise
  // Why devices are missing or were left out, for logs and `erdma-agent devices`, e.g.
  // "no RDMA devices found: /sys/class/infiniband does not exist (no RDMA driver is loaded)".
  std::vector<std::string> notes;
  bool rdma_cm_present = true;  // /dev/infiniband/rdma_cm exists on the host
};

class RdmaDevices {
 public:
  virtual ~RdmaDevices() = default;
  // Discovers the devices now. A node without RDMA is a successful, empty scan with a note; an
  // error means discovery itself failed (the caller keeps its previous view). Called from one
  // thread at a time.
  [[nodiscard]] virtual Result<DeviceScan> scan() = 0;
  // One line for logs: "verbs (drivers: erdma)", "static (2 devices)".
  [[nodiscard]] virtual std::string describe() const = 0;
};

}  // namespace erdma::agent
