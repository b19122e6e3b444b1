// The node facts the DRA driver's slices carry (SliceFacts, agent/core/dra_slices.hpp), gathered
// from the agent's config, the driver's sysfs state, the cards' PCI links (address and root
// complex) and the interface list.
#pragma once

#include <string>
#include <vector>

#include "agent/core/config.hpp"
#include "agent/core/dra_slices.hpp"
#include "agent/core/driver_mode.hpp"
#include "agent/core/rdma_device.hpp"

namespace erdma::agent {

// The node this agent runs on: dra.nodeName, else $NODE_NAME (the DaemonSet sets it from
// spec.nodeName). FailedPrecondition saying how to set it when neither is there.
[[nodiscard]] Result<std::string> dra_node_name(const DraConfig& dra);

// Pure: the facts from what was read. driver_mode is the mode found ("" when the erdma module is
// not loaded: no attribute rather than a made-up one). pci: card -> PCI address; pcie: card -> PCIe
// root; ipv4: netdev -> address.
[[nodiscard]] SliceFacts slice_facts(const AgentConfig& cfg, const std::string& node_name, const std::string& node_uid,
                                     const DriverFacts& driver, DriverMode prefer,
                                     std::map<std::string, std::string> pci, std::map<std::string, std::string> pcie,
                                     std::map<std::string, std::string> ipv4);

// Reads them for `cards` from `sys_root` ("/sys") and the agent's network namespace; what could
// not be read goes to `notes`.
[[nodiscard]] SliceFacts read_slice_facts(const AgentConfig& cfg, const std::string& node_name,
                                          const std::string& node_uid, const std::vector<RdmaDevice>& cards,
                                          const std::string& sys_root, std::vector<std::string>& notes);

}  // namespace erdma::agent
