// CDI specs for prepared claims (see cdi_spec.hpp).
#include "agent/core/cdi_spec.hpp"

#include <algorithm>
#include <set>

#include "agent/core/cdi_hook.hpp"
#include "common/text.hpp"

namespace erdma::agent {
namespace {

using common::json_quote;
using nlohmann::json;

bool is_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

// specs-go/pkg/parser ValidateDeviceName: [A-Za-z0-9_.:-], first and last a letter or digit.
bool is_cdi_device_name(std::string_view s) {
  if (s.empty() || !is_alnum(s.front()) || !is_alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return is_alnum(c) || c == '_' || c == '.' || c == ':' || c == '-'; });
}

std::string claim_ref(const CdiClaim& c) { return "claim " + c.ns + "/" + c.name + " (" + c.uid + ")"; }

json env_list(const std::map<std::string, std::string>& envs) {
  json out = json::array();
  for (const auto& [k, v] : envs) out.push_back(k + "=" + v);  // CDI env entries are "NAME=value"
  return out;
}

}  // namespace

std::string cdi_spec_file_name(std::string_view driver, std::string_view claim_uid) {
  return std::string(driver) + "-" + std::string(kCdiClass) + "_" + std::string(claim_uid) + ".json";
}

std::string cdi_device_id(std::string_view driver, std::string_view claim_uid, std::string_view card) {
  return std::string(driver) + "/" + std::string(kCdiClass) + "=" + std::string(claim_uid) + "-" + std::string(card);
}

bool is_claim_uid(std::string_view uid) noexcept {
  if (uid.empty() || uid.size() > 64 || !is_alnum(uid.front()) || !is_alnum(uid.back())) return false;
  return std::all_of(uid.begin(), uid.end(), [](char c) { return is_alnum(c) || c == '-'; });
}

bool is_claim_spec_file(std::string_view file_name, std::string_view driver) {
  const std::string prefix = std::string(driver) + "-" + std::string(kCdiClass) + "_";
  constexpr std::string_view suffix = ".json";
  if (!file_name.starts_with(prefix) || !file_name.ends_with(suffix)) return false;
  const auto uid = file_name.substr(prefix.size(), file_name.size() - prefix.size() - suffix.size());
  return is_claim_uid(uid);
}

Result<CdiSpec> build_cdi_spec(const CdiClaim& claim, const std::vector<RdmaDevice>& devices,
                               const AllocateOptions& options, std::string_view driver) {
  if (!is_claim_uid(claim.uid)) {
    return make_error(ErrorCode::InvalidArgument, "claim " + claim.ns + "/" + claim.name + ": UID " +
                                                      json_quote(claim.uid) + " is not a Kubernetes UID");
  }
  if (claim.cards.empty()) {
    return make_error(ErrorCode::InvalidArgument, claim_ref(claim) + " has no cards of this driver to prepare");
  }
  CdiSpec out;
  const std::set<std::string> cards(claim.cards.begin(), claim.cards.end());
  out.cards.assign(cards.begin(), cards.end());
  for (const auto& card : out.cards) {
    const std::string name = claim.uid + "-" + card;
    if (!is_cdi_device_name(name)) {
      return make_error(ErrorCode::InvalidArgument, claim_ref(claim) + ": card " + json_quote(card) +
                                                        " gives the CDI device name " + json_quote(name) +
                                                        ", which CDI refuses (it must end with a letter or digit)");
    }
  }

  json spec_edits = json::object();
  std::map<std::string, json> per_card;  // card -> its device's containerEdits
  if (claim.smcr) {
    if (options.preload_host_dir.empty()) {
      return make_error(ErrorCode::FailedPrecondition,
                        claim_ref(claim) + " asks for SMC-R but this agent installs no preload library "
                                           "(smcr.enabled is off or smcr.preloadHostDir is empty); turn SMC-R on "
                                           "in the agent's config");
    }
    for (const auto& card : out.cards) {
      const auto it = std::find_if(devices.begin(), devices.end(), [&](const RdmaDevice& d) { return d.name == card; });
      if (it == devices.end()) {
        return make_error(ErrorCode::NotFound,
                          claim_ref(claim) + ": card " + json_quote(card) + " is not on this node");
      }
      if (!is_healthy(*it)) out.notes.push_back("card " + card + " allocated while unhealthy");
      // The same read-only mount on every card's device: the runtime replaces a mount at the
      // same container path, so a claim with two cards still gets one.
      per_card[card] =
          json{{"mounts", json::array({json{{"hostPath", options.preload_host_dir},
                                            {"containerPath", contract::kPreloadMountPath},
                                            {"options", json::array({"ro", "nosuid", "nodev", "bind"})}}})}};
    }
    const std::map<std::string, std::string> envs = {
        {kDevicesEnv, common::join(out.cards, ",")},
        {std::string(kLdPreloadEnv),
         std::string(contract::kPreloadMountPath) + "/" + std::string(contract::kPreloadLibrary)}};
    spec_edits["env"] = env_list(envs);
    if (!options.cdi_hook_dir.empty()) {
      spec_edits["hooks"] = json::array({cdi_hook_entry(cdi_hook_paths(options.cdi_hook_dir), claim.uid)});
    }
  } else {
    // The device plugin's own decision for these cards, one slot each.
    AllocateOptions opts = options;
    opts.all_devices = false;
    opts.preload_host_dir.clear();
    std::vector<std::string> ids;
    for (const auto& card : out.cards) ids.push_back(slot_id(card, 0));
    auto alloc = allocate_container(ids, devices, 1, opts);
    if (!alloc) return make_error(alloc.error().code, claim_ref(claim) + ": " + alloc.error().message);
    out.notes = alloc->notes;
    json spec_nodes = json::array();
    for (const auto& node : alloc->device_nodes) {
      const json dn = {{"path", node.container_path}, {"permissions", node.permissions}};
      if (node.container_path == kRdmaCmPath) {
        spec_nodes.push_back(dn);
        continue;
      }
      for (const auto& d : devices) {
        if (std::find(out.cards.begin(), out.cards.end(), d.name) != out.cards.end() &&
            uverbs_path(d) == node.container_path) {
          per_card[d.name] = json{{"deviceNodes", json::array({dn})}};
        }
      }
    }
    spec_edits["env"] = env_list(alloc->envs);
    if (!spec_nodes.empty()) spec_edits["deviceNodes"] = std::move(spec_nodes);
  }

  json cdi_devices = json::array();
  for (const auto& card : out.cards) {
    // Every CDI device needs edits of its own (pkg/cdi device.go: "empty device edits" is refused).
    const auto it = per_card.find(card);
    if (it == per_card.end()) {
      return make_error(ErrorCode::Internal, claim_ref(claim) + ": no container edits for card " + card);
    }
    cdi_devices.push_back(json{{"name", claim.uid + "-" + card}, {"containerEdits", it->second}});
    out.cdi_ids[card] = cdi_device_id(driver, claim.uid, card);
  }
  out.spec = json{{"cdiVersion", kCdiVersion},
                  {"kind", std::string(driver) + "/" + std::string(kCdiClass)},
                  {"devices", std::move(cdi_devices)},
                  {"containerEdits", std::move(spec_edits)}};
  out.file_name = cdi_spec_file_name(driver, claim.uid);
  return out;
}

}  // namespace erdma::agent
