// Which erdma driver mode a node runs, compared with the mode the agent was told to expect, as a
// pure decision over facts read from sysfs (agent/sys/kernel_modules.*). The modes and the facts
// behind them are described in docs/node-preparation.md.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "agent/core/config.hpp"

namespace erdma::agent {

// What /sys/module and /sys/class/infiniband say about the node's RDMA drivers.
struct DriverFacts {
  bool erdma_loaded = false;           // /sys/module/erdma exists
  std::optional<bool> compat_mode;     // /sys/module/erdma/parameters/compat_mode (Y/N); nullopt: no such parameter
  std::string erdma_version;           // /sys/module/erdma/version ("" for in-tree builds without one)
  bool ofed_stack = false;             // /sys/module/mlx_compat exists: the RDMA core comes from MLNX_OFED
  bool nvidia_loaded = false;          // /sys/module/nvidia exists (an NVIDIA GPU driver is loaded)
  bool nvidia_peermem_loaded = false;  // /sys/module/nvidia_peermem exists (GPUDirect RDMA)
  bool smc_loaded = false;             // /sys/module/smc exists
  // node_type of each erdma device (/sys/class/infiniband/DEV/node_type): "CA" or "RNIC".
  std::vector<std::pair<std::string, std::string>> node_types;
};

// The mode found: "none" (no erdma module), "default", "compat" or "ofed".
[[nodiscard]] std::string found_mode(const DriverFacts& facts);

// `auto` resolved: ofed where an NVIDIA driver is loaded, default elsewhere.
[[nodiscard]] DriverMode wanted_mode(DriverMode prefer, const DriverFacts& facts);

struct DriverVerdict {
  std::string want;  // default, compat or ofed
  std::string have;  // none, default, compat or ofed
  bool mismatch = false;
  bool smcr_capable = false;       // SMC-R can work: default mode and the smc module loaded
  std::string line;                // one line for operators: what is wrong and how to fix it, or that all is well
  std::vector<std::string> notes;  // secondary findings (e.g. GPUDirect RDMA without nvidia_peermem)
  std::vector<std::string> modules_to_load;  // missing modules an operator could modprobe

  friend bool operator==(const DriverVerdict&, const DriverVerdict&) = default;
};

// Compares the node with the preferred mode. Pure; same facts, same verdict.
[[nodiscard]] DriverVerdict judge_driver(DriverMode prefer, const DriverFacts& facts);

// The modules the agent itself may load when driver.loadModules is on, from the verdict's missing
// modules: smc together with smc_diag (erdma-agent smc-status reads sockets through it),
// nvidia_peermem, and erdma only when the wanted mode is default (compat and ofed need a
// driver build or module options the agent does not choose). Never reloads a loaded module.
[[nodiscard]] std::vector<std::string> plan_module_loads(const DriverVerdict& verdict);

// The node-feature-discovery local feature file for a verdict: `name=value` lines, names without
// a namespace (NFD prefixes them with feature.node.kubernetes.io/), values valid label values.
[[nodiscard]] std::string nfd_features(const DriverVerdict& verdict, size_t device_count);

}  // namespace erdma::agent
