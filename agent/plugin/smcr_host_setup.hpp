// SMC-R host setup: for every eRDMA port an IB pnet entry `device port -> PNETID`, an ETH entry
// for each device's netdev, and the UEID from the config, in the host's network namespace.
// Reads the kernel's tables, plans with plan_host_setup() (pure) and applies the difference, so
// running it again changes nothing. Call it from a thread in the host netns.
#pragma once

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
};

class SmcrHostSetup {
 public:
  SmcrHostSetup(const SmcrConfig& cfg, PnetTableOpener open_table, SmcInfoOpener open_info);

  // Brings the host's pnet table and UEID table to what `devices` need. Errors: the tables
  // cannot be read or changed (Unavailable "the kernel has no SMC", PermissionDenied without
  // CAP_NET_ADMIN, ...); the message names the operation. Conflicts are not errors.
  [[nodiscard]] Result<HostSetupReport> reconcile(const std::vector<RdmaDevice>& devices);

 private:
  SmcrConfig cfg_;
  PnetTableOpener open_table_;
  SmcInfoOpener open_info_;
};

}  // namespace erdma::agent
