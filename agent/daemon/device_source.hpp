// The device source the config asks for: the daemon's and the `devices`/`status` commands'.
#pragma once

#include <memory>

#include "agent/core/config.hpp"
#include "agent/sys/rdma_devices.hpp"

namespace erdma::agent {

// A static list (demos, tests) or libibverbs + sysfs + RDMA netlink.
[[nodiscard]] std::unique_ptr<RdmaDevices> make_device_source(const AgentConfig& cfg);

}  // namespace erdma::agent
