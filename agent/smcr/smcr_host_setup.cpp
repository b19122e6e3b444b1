// SMC-R host setup (see smcr_host_setup.hpp).
#include "agent/smcr/smcr_host_setup.hpp"

#include <algorithm>

namespace erdma::agent {

SmcrHostSetup::SmcrHostSetup(const SmcrConfig& cfg, PnetTableOpener open_table, SmcInfoOpener open_info,
                             SmcdLoopbackProbe smcd_loopback)
    : cfg_(cfg),
      open_table_(std::move(open_table)),
      open_info_(std::move(open_info)),
      smcd_loopback_(std::move(smcd_loopback)) {}

Result<HostSetupReport> SmcrHostSetup::reconcile(const std::vector<RdmaDevice>& devices) {
  HostSetupReport report;
  ERDMA_TRY_ASSIGN(auto desired, host_pnet_entries(cfg_.pnet_id, smcr_ports_of(devices, &report.notes)));
  const std::string loopback = smcd_loopback_();
  ERDMA_TRY_ASSIGN(auto smcd, smcd_loopback_entries(cfg_.smcd_loopback, loopback));
  desired.insert(desired.end(), smcd.begin(), smcd.end());
  std::optional<Ueid> ueid;
  if (!cfg_.ueid.empty()) {
    ERDMA_TRY_ASSIGN(auto u, Ueid::parse(cfg_.ueid));
    ueid = u;
  }

  ERDMA_TRY_ASSIGN(auto table, open_table_());
  auto actual = table->list();
  if (!actual) return make_error(actual.error().code, "reading the pnet table: " + actual.error().message);
  std::unique_ptr<SmcInfo> info;
  std::vector<Ueid> actual_ueids;
  if (ueid) {
    ERDMA_TRY_ASSIGN(auto i, open_info_());
    info = std::move(i);
    auto l = info->ueids();
    if (!l) return make_error(l.error().code, "reading the UEID table: " + l.error().message);
    actual_ueids = std::move(*l);
  }

  const auto plan = plan_host_setup(desired, *actual, ueid, actual_ueids, {smcd_off_pnet_id()});
  report.conflicts = plan.conflicts;
  if (!loopback.empty()) {
    const bool foreign = std::any_of(actual->begin(), actual->end(), [&](const PnetEntry& e) {
      return e.kind == PnetEntryKind::Ib && e.device == loopback && e.pnet_id != smcd_off_pnet_id();
    });
    report.smcd_loopback = cfg_.smcd_loopback && !foreign ? "on" : "off";
  }
  for (const auto& op : plan.ops) {
    Status s;
    if (const auto* r = std::get_if<RemovePnetId>(&op)) {
      auto c = table->remove(r->id);
      if (!c) s = c.error();
    } else if (const auto* a = std::get_if<AddEntry>(&op)) {
      auto c = table->add(a->entry);
      if (!c) s = c.error();
    } else if (const auto* u = std::get_if<AddUeid>(&op)) {
      auto c = info->add_ueid(u->ueid);
      if (!c) s = c.error();
    }
    if (!s) return make_error(s.error().code, describe(op) + ": " + s.error().message);
    report.applied.push_back(describe(op));
  }
  return report;
}

}  // namespace erdma::agent
