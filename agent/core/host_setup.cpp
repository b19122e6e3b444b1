// Host setup planning (see host_setup.hpp): set arithmetic over pnet entries, no I/O.
#include "agent/core/host_setup.hpp"

#include <algorithm>
#include <set>

namespace erdma::agent {

std::vector<SmcrPort> smcr_ports_of(const std::vector<RdmaDevice>& devices, std::vector<std::string>* notes) {
  std::vector<SmcrPort> out;
  for (const auto& d : devices) {
    for (const auto& p : d.ports) {
      if (p.number < 1 || p.number > kMaxSmcIbPort) {
        if (notes != nullptr) {
          notes->push_back("RDMA device " + d.name + " port " + std::to_string(p.number) +
                           ": SMC-R uses ports 1 and 2 only; no pnet entry");
        }
        continue;
      }
      out.push_back(SmcrPort{d.name, static_cast<uint8_t>(p.number), d.netdev});
    }
  }
  return out;
}

Result<std::vector<PnetEntry>> host_pnet_entries(const PnetId& pnet_id, const std::vector<SmcrPort>& ports) {
  std::set<PnetEntry> out;
  for (const auto& p : ports) {
    ERDMA_TRY_ASSIGN(auto ib, PnetEntry::ib(pnet_id, p.ib_device, p.port));
    out.insert(std::move(ib));
    if (!p.netdev.empty()) {
      ERDMA_TRY_ASSIGN(auto eth, PnetEntry::eth(pnet_id, p.netdev));
      out.insert(std::move(eth));
    }
  }
  return std::vector<PnetEntry>(out.begin(), out.end());
}

PnetId smcd_off_pnet_id() {
  static const PnetId id = *PnetId::parse("ERDMANOSMCD");
  return id;
}

Result<std::vector<PnetEntry>> smcd_loopback_entries(bool smcd_loopback, std::string_view loopback_device) {
  if (smcd_loopback || loopback_device.empty()) return std::vector<PnetEntry>{};
  ERDMA_TRY_ASSIGN(auto e, PnetEntry::ib(smcd_off_pnet_id(), loopback_device, 1));
  return std::vector<PnetEntry>{std::move(e)};
}

std::string describe(const SetupOp& op) {
  struct V {
    std::string operator()(const RemovePnetId& r) const { return "delete pnet entries of " + r.id.str(); }
    std::string operator()(const AddEntry& a) const { return "add pnet entry " + a.entry.to_string(); }
    std::string operator()(const AddUeid& u) const { return "add UEID " + u.ueid.str(); }
  };
  return std::visit(V{}, op);
}

SetupPlan plan_host_setup(const std::vector<PnetEntry>& desired, const std::vector<PnetEntry>& actual,
                          const std::optional<Ueid>& desired_ueid, const std::vector<Ueid>& actual_ueids,
                          const std::vector<PnetId>& owned) {
  SetupPlan plan;
  const std::set<PnetEntry> want(desired.begin(), desired.end());
  const std::set<PnetEntry> have(actual.begin(), actual.end());
  std::set<PnetId> ours(owned.begin(), owned.end());
  for (const auto& e : want) ours.insert(e.pnet_id);

  // A desired device that the table maps to a different PNETID cannot be added (EEXIST).
  std::set<PnetEntry> blocked;
  for (const auto& w : want) {
    for (const auto& h : have) {
      if (h.same_device(w) && h.pnet_id != w.pnet_id) {
        blocked.insert(w);
        plan.conflicts.push_back((w.kind == PnetEntryKind::Ib
                                      ? "RDMA device " + w.device + " port " + std::to_string(w.port)
                                      : "interface " + w.device) +
                                 " is already mapped to PNETID " + h.pnet_id.str() + ", not " + w.pnet_id.str() +
                                 "; left unchanged (delete PNETID " + h.pnet_id.str() + " to let the agent set it)");
      }
    }
  }

  // Stale entries on our PNETIDs force a rebuild of that PNETID.
  std::set<PnetId> rebuild;
  for (const auto& h : have) {
    if (ours.count(h.pnet_id) != 0 && want.count(h) == 0) rebuild.insert(h.pnet_id);
  }
  for (const auto& id : rebuild) plan.ops.emplace_back(RemovePnetId{id});
  for (const auto& w : want) {
    if (blocked.count(w) != 0) continue;
    if (rebuild.count(w.pnet_id) != 0 || have.count(w) == 0) plan.ops.emplace_back(AddEntry{w});
  }

  if (desired_ueid && std::find(actual_ueids.begin(), actual_ueids.end(), *desired_ueid) == actual_ueids.end()) {
    if (actual_ueids.size() >= kMaxUeids) {
      plan.conflicts.push_back("UEID table is full (" + std::to_string(kMaxUeids) + " entries); cannot add " +
                               desired_ueid->str() + " (remove one with `erdma-agent ueid del`)");
    } else {
      plan.ops.emplace_back(AddUeid{*desired_ueid});
    }
  }
  return plan;
}

Status validate_smc_sysctl(std::string_view name, std::string_view value) {
  constexpr std::string_view kPrefix = "net.smc.";
  const std::string what = "sysctl " + std::string(name) + ": ";
  if (name.substr(0, kPrefix.size()) != kPrefix || name.size() == kPrefix.size()) {
    return make_error(ErrorCode::InvalidArgument,
                      "sysctl \"" + std::string(name) + "\": only net.smc.<name> is allowed");
  }
  for (char c : name.substr(kPrefix.size())) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) {
      return make_error(ErrorCode::InvalidArgument, what + "name may only contain a-z, 0-9 and '_' after net.smc.");
    }
  }
  if (value.empty() || value.size() > 64) {
    return make_error(ErrorCode::InvalidArgument, what + "value must be 1..64 characters");
  }
  for (char c : value) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == ' ' || c == '.' ||
          c == '-' || c == '_')) {
      return make_error(ErrorCode::InvalidArgument,
                        what + "value may only contain letters, digits, ' ', '.', '-', '_'");
    }
  }
  return {};
}

std::string sysctl_path(std::string_view name, std::string_view proc_root) {
  std::string out = std::string(proc_root) + "/sys/";
  for (char c : name) out += (c == '.') ? '/' : c;
  return out;
}

}  // namespace erdma::agent
