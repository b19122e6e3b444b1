// SMC-R host setup: for every eRDMA port an IB pnet entry `device port -> PNETID`, an ETH entry
// for each device's netdev, the UEID from the config, and with smcr.smcdLoopback: false the entry
// that turns the kernel's SMC-D loopback device off, in the host's network namespace.
// Reads the kernel's tables, plans with plan_host_setup() (pure) and applies the difference, so
// running it again changes nothing. Call it from a thread in the host netns.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "agent/core/config.hpp"
#include "agent/core/host_setup.hpp"
#include "agent/sys/netlink_smc.hpp"

namespace erdma::agent {

struct HostSetupReport {
  std::vector<std::string> applied;    // describe(op) of every change made
  std::vector<std::string> conflicts;  // what was left alone (entries owned by someone else, full UEID table)
  std::vector<std::string> notes;      // ports SMC cannot use
  // The SMC-D loopback device after the setup: "on", "off" (a PNETID on it: smcr.smcdLoopback:
  // false, or an administrator's entry) or "absent" (the kernel has none).
  std::string smcd_loopback = "absent";
};

// The name of the kernel's SMC-D loopback device, "" when it has none (kernel_smcd_loopback_device()).
using SmcdLoopbackProbe = std::function<std::string()>;

class SmcrHostSetup {
 public:
  SmcrHostSetup(
      const SmcrConfig& cfg, PnetTableOpener open_table, SmcInfoOpener open_info,
      SmcdLoopbackProbe smcd_loopback = [] { return std::string(); });

  // Brings the host's pnet table and UEID table to what `devices` need. Errors: the tables
  // cannot be read or changed (Unavailable "the kernel has no SMC", PermissionDenied without
  // CAP_NET_ADMIN, ...); the message names the operation. Conflicts are not errors.
  [[nodiscard]] Result<HostSetupReport> reconcile(const std::vector<RdmaDevice>& devices);

 private:
  SmcrConfig cfg_;
  PnetTableOpener open_table_;
  SmcInfoOpener open_info_;
  SmcdLoopbackProbe smcd_loopback_;
};

}  // namespace erdma::agent
