// Node facts for the DRA slices (see dra_facts.hpp).
#include "agent/dra/dra_facts.hpp"

#include <cstdlib>

#include "agent/sys/dra_node_facts.hpp"
#include "agent/sys/kernel_modules.hpp"
#include "agent/sys/rdma_netlink.hpp"
#include "common/k8s_names.hpp"
#include "common/text.hpp"

namespace erdma::agent {

Result<std::string> dra_node_name(const DraConfig& dra) {
  if (!dra.node_name.empty()) return dra.node_name;
  const char* env = std::getenv("NODE_NAME");
  if (env == nullptr || *env == '\0') {
    return make_error(ErrorCode::FailedPrecondition,
                      "the DRA driver needs its node's name: set the environment variable NODE_NAME from the pod's "
                      "spec.nodeName (manifests/dra does) or dra.nodeName in the agent config");
  }
  if (const auto check = common::check_name(common::NameRule::Dns1123Subdomain, env); !check) {
    return make_error(ErrorCode::InvalidArgument, "NODE_NAME " + common::json_quote(env) + " " +
                                                      common::describe(check, "a node name") +
                                                      "; set it from the pod's spec.nodeName");
  }
  return std::string(env);
}

SliceFacts slice_facts(const AgentConfig& cfg, const std::string& node_name, const std::string& node_uid,
                       const DriverFacts& driver, DriverMode prefer, std::map<std::string, std::string> pci,
                       std::map<std::string, std::string> pcie, std::map<std::string, std::string> ipv4) {
  SliceFacts f;
  f.node_name = node_name;
  f.node_uid = node_uid;
  f.driver = cfg.dra.driver_name;
  const std::string mode = found_mode(driver);
  f.driver_mode = mode == "none" ? "" : mode;
  f.smcr_capable = judge_driver(prefer, driver).smcr_capable;
  f.driver_version = driver.erdma_version;
  f.health = cfg.dra.health == DraHealthPolicy::Taint ? HealthPolicy::Taint : HealthPolicy::Omit;
  f.shared_slots = cfg.dra.slots_per_device;
  f.pci_addresses = std::move(pci);
  f.pcie_roots = std::move(pcie);
  f.ipv4_addresses = std::move(ipv4);
  return f;
}

SliceFacts read_slice_facts(const AgentConfig& cfg, const std::string& node_name, const std::string& node_uid,
                            const std::vector<RdmaDevice>& cards, const std::string& sys_root,
                            std::vector<std::string>& notes) {
  std::vector<std::string> names;
  names.reserve(cards.size());
  for (const auto& c : cards) names.push_back(c.name);
  auto pci = sysfs::pci_addresses(sys_root, names, notes);
  auto pcie = sysfs::pcie_roots(sys_root, names, notes);
  auto ipv4 = ipv4_by_netdev(notes);
  SliceFacts f = slice_facts(cfg, node_name, node_uid, read_driver_facts(sys_root), cfg.driver.prefer, std::move(pci),
                             std::move(pcie), std::move(ipv4));
  if (auto mode = read_rdma_netns_mode()) {
    f.rdma_netns_mode = std::string(to_string(*mode));
  } else {
    notes.push_back("rdmaNetnsMode not published: " + mode.error().message);
  }
  return f;
}

}  // namespace erdma::agent
