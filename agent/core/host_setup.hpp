// Pure planning of the SMC-R host setup: which pnet entries and which UEID the host netns should
// have, compared with what the kernel reports, gives the operations to apply. No I/O: the shell
// reads the tables, calls plan_host_setup() and applies the ops through PnetTable and SmcInfo.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "agent/core/pnet.hpp"
#include "agent/core/rdma_device.hpp"
#include "agent/core/ueid.hpp"
#include "common/result.hpp"

namespace erdma::agent {

// One RDMA port that SMC-R may use and the netdev it belongs to ("" when not known).
struct SmcrPort {
  std::string ib_device;
  uint8_t port = 1;
  std::string netdev;
};

// The SMC-R ports of discovered devices: every port 1..2 of every device, with the device's
// netdev. Ports SMC cannot address (above 2) are left out and named in `notes`.
[[nodiscard]] std::vector<SmcrPort> smcr_ports_of(const std::vector<RdmaDevice>& devices,
                                                  std::vector<std::string>* notes = nullptr);

// The host entries for `ports`: an IB entry per port and an ETH entry per distinct netdev, all on
// `pnet_id`, sorted and without duplicates. InvalidArgument names the port whose names or port
// number the kernel would refuse.
[[nodiscard]] Result<std::vector<PnetEntry>> host_pnet_entries(const PnetId& pnet_id,
                                                               const std::vector<SmcrPort>& ports);

// The PNETID the agent puts on the kernel's SMC-D loopback device to turn it off
// (smcr.smcdLoopback: false). No netdev carries it, so SMC-D never matches a connection's
// interface and the kernel proposes SMC-R instead.
[[nodiscard]] PnetId smcd_off_pnet_id();

// The pnet entries smcr.smcdLoopback asks for: none when `smcd_loopback` is true or the kernel
// has no loopback device (`loopback_device` ""), else `loopback_device port 1 -> smcd_off_pnet_id()`
// (the kernel applies an IB entry to the SMC-D device of that name).
[[nodiscard]] Result<std::vector<PnetEntry>> smcd_loopback_entries(bool smcd_loopback,
                                                                   std::string_view loopback_device);

struct AddEntry {
  PnetEntry entry;
  friend bool operator==(const AddEntry&, const AddEntry&) = default;
};
// Deletes every entry carrying the PNETID (the kernel deletes by PNETID only).
struct RemovePnetId {
  PnetId id;
  friend bool operator==(const RemovePnetId&, const RemovePnetId&) = default;
};
struct AddUeid {
  Ueid ueid;
  friend bool operator==(const AddUeid&, const AddUeid&) = default;
};
using SetupOp = std::variant<RemovePnetId, AddEntry, AddUeid>;

[[nodiscard]] std::string describe(const SetupOp& op);

struct SetupPlan {
  std::vector<SetupOp> ops;            // apply in order: removals, then additions
  std::vector<std::string> conflicts;  // what cannot be reached without touching others' entries
};

// Compares desired with actual state:
// - a desired entry already present is left alone;
// - a device already mapped to another PNETID is a conflict (reported, never changed: that
//   PNETID may belong to an administrator);
// - entries on one of our PNETIDs that are no longer desired (a device went away) make the plan
//   delete that PNETID and add its desired entries again, because the kernel deletes by PNETID;
// - `owned` PNETIDs are the agent's even when nothing desired carries them (the SMC-D switch):
//   their entries are deleted once no longer desired;
// - the UEID is added when absent; a full table (4) is a conflict. Other UEIDs are kept.
// Deterministic: the same inputs give the same ops in the same order.
[[nodiscard]] SetupPlan plan_host_setup(const std::vector<PnetEntry>& desired, const std::vector<PnetEntry>& actual,
                                        const std::optional<Ueid>& desired_ueid, const std::vector<Ueid>& actual_ueids,
                                        const std::vector<PnetId>& owned = {});

// `net.smc.*` sysctls a pod netns gets. The name must be net.smc.<name> with <name> made of a-z,
// 0-9 and '_'; the value 1..64 characters of letters, digits, ' ', '.', '-' and '_'.
[[nodiscard]] Status validate_smc_sysctl(std::string_view name, std::string_view value);
// "net.smc.wmem" -> "/proc/sys/net/smc/wmem", or under another procfs mount such as
// "/host/proc" (name assumed valid for any net.* sysctl).
[[nodiscard]] std::string sysctl_path(std::string_view name, std::string_view proc_root = "/proc");

}  // namespace erdma::agent
