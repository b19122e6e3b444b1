// Loading and validating the agent configuration (see config.hpp).
#include "agent/core/config.hpp"

#include <algorithm>
#include <initializer_list>
#include <set>

#include "agent/core/cdi_hook_protocol.h"
#include "agent/core/dra_slices.hpp"
#include "agent/core/host_setup.hpp"
#include "agent/core/plugin_model.hpp"
#include "agent/core/pnet.hpp"
#include "agent/core/ueid.hpp"
#include "common/config_reader.hpp"
#include "common/json_types.hpp"
#include "common/listen_address.hpp"
#include "common/text.hpp"

namespace erdma::agent {
namespace {

using common::json_quote;
using nlohmann::json;

namespace cfg = common::config;

Status check_dir(const std::string& p, const std::string& key) { return cfg::check_abs_path(p, key); }

// Linux interface names: 1..15 bytes (IFNAMSIZ-1), no '/', ':' or whitespace.
bool is_netdev_name(std::string_view s) {
  if (s.empty() || s.size() > 15 || s == "." || s == "..") return false;
  return std::none_of(s.begin(), s.end(), [](char c) {
    return c == '/' || c == ':' || c == ' ' || c == '\t' || c == '\n' || static_cast<unsigned char>(c) < 0x20;
  });
}

bool is_driver_name(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'; });
}

Result<std::vector<std::string>> load_drivers(const json& devices, const std::string& path) {
  const json* v = cfg::get(devices, "drivers");
  if (v == nullptr) return std::vector<std::string>{"erdma"};
  if (!v->is_array()) return cfg::type_error(*v, path, "a list of driver names");
  if (v->empty()) return cfg::error(path, "must name at least one driver (e.g. [erdma])");
  std::vector<std::string> out;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& item = (*v)[i];
    const std::string p = path + "[" + std::to_string(i) + "]";
    if (!item.is_string()) return cfg::type_error(item, p, "a string");
    const auto name = item.get<std::string>();
    if (!is_driver_name(name)) {
      return cfg::error(p, "must be a kernel driver name like erdma or rxe ([a-z0-9_-]), got " + json_quote(name));
    }
    if (std::find(out.begin(), out.end(), name) != out.end()) return cfg::error(p, "duplicate driver " + name);
    out.push_back(name);
  }
  return out;
}

Result<std::vector<RdmaDevice>> load_static(const json& devices, const std::string& path, unsigned slots) {
  const json* v = cfg::get(devices, "static");
  if (v == nullptr) return std::vector<RdmaDevice>{};
  if (!v->is_array()) return cfg::type_error(*v, path, "a list of {name, uverbs, netdev, state, numaNode}");
  std::vector<RdmaDevice> out;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& item = (*v)[i];
    const std::string p = path + "[" + std::to_string(i) + "]";
    if (!item.is_object()) return cfg::type_error(item, p, "a map with name and uverbs");
    ERDMA_TRY(cfg::check_keys(item, p, {"name", "uverbs", "netdev", "state", "numaNode"}));
    ERDMA_TRY_ASSIGN(auto name, cfg::get_string(item, "name", p + ".name", ""));
    ERDMA_TRY_ASSIGN(auto uverbs, cfg::get_string(item, "uverbs", p + ".uverbs", ""));
    ERDMA_TRY_ASSIGN(auto netdev, cfg::get_string(item, "netdev", p + ".netdev", ""));
    ERDMA_TRY_ASSIGN(auto state, cfg::get_string(item, "state", p + ".state", "ACTIVE"));
    ERDMA_TRY_ASSIGN(auto numa, cfg::get_int(item, "numaNode", p + ".numaNode", -1, -1, 1023));

    if (name.empty()) return cfg::error(p + ".name", "missing (the IB device name, e.g. erdma_0)");
    if (!is_device_name(name)) {
      return cfg::error(p + ".name", "must be 1-63 characters of [A-Za-z0-9_.-], got " + json_quote(name));
    }
    if (auto fits = check_device_name_fits(name, slots); !fits) return cfg::error(p + ".name", fits.error().message);
    if (uverbs.empty()) return cfg::error(p + ".uverbs", "missing (the char device name, e.g. uverbs0)");
    if (!is_uverbs_name(uverbs)) {
      return cfg::error(p + ".uverbs",
                        "must look like \"uverbs0\" (the name under /dev/infiniband), got " + json_quote(uverbs));
    }
    if (!netdev.empty() && !is_netdev_name(netdev)) {
      return cfg::error(p + ".netdev", "must be a network interface name (1-15 chars, no '/', ':' or blanks), got " +
                                           json_quote(netdev));
    }
    const auto ps = parse_port_state_name(state);
    if (!ps || *ps == PortState::Unknown) {
      return cfg::error(p + ".state",
                        "must be one of ACTIVE, DOWN, INIT, ARMED, ACTIVE_DEFER, got " + json_quote(state));
    }
    for (const auto& other : out) {
      if (other.name == name) return cfg::error(p + ".name", "duplicate device " + name);
      if (other.uverbs == uverbs) return cfg::error(p + ".uverbs", uverbs + " is already used by " + other.name);
    }
    RdmaDevice d;
    d.name = name;
    d.driver = "static";
    d.uverbs = uverbs;
    d.netdev = netdev;
    d.numa_node = static_cast<int>(numa);
    d.ports.push_back(RdmaPort{1, *ps, "Ethernet", {}});
    out.push_back(std::move(d));
  }
  return out;
}

// An absolute path to a unix socket (fits sockaddr_un).
Result<std::string> get_socket_path(const json& obj, const char* key, std::string fallback) {
  ERDMA_TRY_ASSIGN(auto p, cfg::get_string(obj, key, key, std::move(fallback)));
  ERDMA_TRY(check_dir(p, key));
  if (p.size() > kMaxUnixPathLen) {
    return cfg::error(key, "too long for a unix socket path (at most " + std::to_string(kMaxUnixPathLen) + " bytes)");
  }
  return p;
}

Status load_smcr(const json& doc, SmcrConfig& out) {
  const json* smcr = cfg::get(doc, "smcr");
  if (smcr == nullptr) return {};
  if (!smcr->is_object()) return cfg::type_error(*smcr, "smcr", "a map");
  if (auto s = cfg::check_keys(*smcr, "smcr",
                               {"enabled", "pnetId", "ueid", "sysctls", "podInterface", "preloadSource",
                                "preloadHostDir", "callTimeoutMs", "statsSeconds", "resourceName", "slotsPerDevice",
                                "allowedNamespaces", "smcdLoopback"});
      !s) {
    return s;
  }
  ERDMA_TRY_ASSIGN(auto enabled, cfg::get_bool(*smcr, "enabled", "smcr.enabled", out.enabled));
  out.enabled = enabled;

  ERDMA_TRY_ASSIGN(auto pnet, cfg::get_string(*smcr, "pnetId", "smcr.pnetId", out.pnet_id.str()));
  auto id = PnetId::parse(pnet);
  if (!id) return cfg::error("smcr.pnetId", id.error().message);
  out.pnet_id = std::move(*id);

  ERDMA_TRY_ASSIGN(auto ueid, cfg::get_string(*smcr, "ueid", "smcr.ueid", out.ueid));
  if (!ueid.empty()) {
    auto u = Ueid::parse(ueid);
    if (!u) return cfg::error("smcr.ueid", u.error().message + " (\"\" leaves the UEID table alone)");
    out.ueid = u->str();
  } else {
    out.ueid.clear();
  }

  if (const json* sysctls = cfg::get(*smcr, "sysctls")) {
    if (!sysctls->is_object()) return cfg::type_error(*sysctls, "smcr.sysctls", "a map of net.smc.* names to values");
    out.sysctls.clear();
    for (const auto& [name, value] : sysctls->items()) {
      const std::string p = "smcr.sysctls." + name;
      std::string text;
      if (value.is_string()) {
        text = value.get<std::string>();
      } else if (value.is_number_integer()) {
        text = value.dump();
      } else {
        return cfg::type_error(value, p, "a string or an integer");
      }
      if (auto v = validate_smc_sysctl(name, text); !v) return cfg::error(p, v.error().message);
      out.sysctls[name] = text;
    }
  }

  ERDMA_TRY_ASSIGN(auto ifname, cfg::get_string(*smcr, "podInterface", "smcr.podInterface", out.pod_interface));
  if (auto v = validate_ifname(ifname); !v) return cfg::error("smcr.podInterface", v.error().message);
  out.pod_interface = ifname;

  ERDMA_TRY_ASSIGN(auto source, cfg::get_string(*smcr, "preloadSource", "smcr.preloadSource", out.preload_source));
  if (!source.empty()) {
    if (auto s = check_dir(source, "smcr.preloadSource"); !s) return s;
  }
  out.preload_source = source;

  ERDMA_TRY_ASSIGN(auto dir, cfg::get_string(*smcr, "preloadHostDir", "smcr.preloadHostDir", out.preload_host_dir));
  if (auto s = check_dir(dir, "smcr.preloadHostDir"); !s) return s;
  out.preload_host_dir = cfg::trim_trailing_slashes(dir);

  ERDMA_TRY_ASSIGN(auto timeout,
                   cfg::get_int(*smcr, "callTimeoutMs", "smcr.callTimeoutMs", out.call_timeout_ms, 50, 20000));
  out.call_timeout_ms = static_cast<unsigned>(timeout);

  ERDMA_TRY_ASSIGN(auto stats, cfg::get_int(*smcr, "statsSeconds", "smcr.statsSeconds", out.stats_seconds, 1, 3600));
  out.stats_seconds = static_cast<unsigned>(stats);

  ERDMA_TRY_ASSIGN(auto resource, cfg::get_string(*smcr, "resourceName", "smcr.resourceName", out.resource_name));
  if (!resource.empty()) {
    if (auto named = cfg::check_name(resource, common::NameRule::ExtendedResourceName, "smcr.resourceName"); !named) {
      return make_error(ErrorCode::InvalidArgument, named.error().message + ", or \"\" to not advertise it");
    }
  }
  out.resource_name = resource;
  ERDMA_TRY_ASSIGN(auto slots, cfg::get_int(*smcr, "slotsPerDevice", "smcr.slotsPerDevice", out.slots_per_device, 1,
                                            kMaxSlotsPerDevice));
  out.slots_per_device = static_cast<unsigned>(slots);
  ERDMA_TRY_ASSIGN(out.allowed_namespaces, cfg::get_namespace_list(*smcr, "allowedNamespaces", "smcr.allowedNamespaces",
                                                                   out.allowed_namespaces));
  ERDMA_TRY_ASSIGN(auto smcd, cfg::get_bool(*smcr, "smcdLoopback", "smcr.smcdLoopback", out.smcd_loopback));
  out.smcd_loopback = smcd;
  return {};
}

Status load_driver(const json& doc, DriverConfig& out) {
  const json* driver = cfg::get(doc, "driver");
  if (driver == nullptr) return {};
  if (!driver->is_object()) return cfg::type_error(*driver, "driver", "a map with prefer");
  // The agent reports the mode; it never reloads modules, and loads missing ones only with
  // loadModules (see docs/node-preparation.md).
  if (auto s = cfg::check_keys(*driver, "driver", {"prefer", "loadModules", "modprobe"}); !s) return s;
  ERDMA_TRY_ASSIGN(auto load, cfg::get_bool(*driver, "loadModules", "driver.loadModules", out.load_modules));
  out.load_modules = load;
  ERDMA_TRY_ASSIGN(auto modprobe, cfg::get_string(*driver, "modprobe", "driver.modprobe", out.modprobe));
  if (modprobe.empty() || modprobe.front() != '/') {
    return cfg::error("driver.modprobe", "must be an absolute path, got " + json_quote(modprobe));
  }
  out.modprobe = modprobe;
  ERDMA_TRY_ASSIGN(auto prefer,
                   cfg::get_string(*driver, "prefer", "driver.prefer", std::string(to_string(out.prefer))));
  bool found = false;
  for (auto m : {DriverMode::Default, DriverMode::Compat, DriverMode::Ofed, DriverMode::Auto}) {
    if (prefer == to_string(m)) {
      out.prefer = m;
      found = true;
    }
  }
  if (!found) {
    return cfg::error("driver.prefer",
                      "must be default (SMC-R application nodes), compat (RoCE-compatible), ofed "
                      "(GPU nodes running NCCL) or auto (ofed where an NVIDIA driver is loaded), got " +
                          json_quote(prefer));
  }
  return {};
}

Status load_dra(const json& doc, DraConfig& out) {
  const json* dra = cfg::get(doc, "dra");
  if (dra == nullptr) return {};
  if (!dra->is_object()) return cfg::type_error(*dra, "dra", "a map with enabled");
  ERDMA_TRY(cfg::check_keys(*dra, "dra",
                            {"enabled", "extendedResource", "driverName", "registryDir", "pluginDir", "cdiDir",
                             "healthPolicy", "slotsPerDevice", "nodeName", "hookDir", "hookSource"}));
  ERDMA_TRY_ASSIGN(out.enabled, cfg::get_bool(*dra, "enabled", "dra.enabled", out.enabled));
  ERDMA_TRY_ASSIGN(out.extended_resource,
                   cfg::get_bool(*dra, "extendedResource", "dra.extendedResource", out.extended_resource));
  if (out.extended_resource && !out.enabled) {
    return cfg::error("dra.extendedResource", "needs dra.enabled: true (without the DRA driver nothing would serve the "
                                              "resource on this node)");
  }
  ERDMA_TRY_ASSIGN(out.driver_name, cfg::get_string(*dra, "driverName", "dra.driverName", out.driver_name));
  // A DNS subdomain of at most 63 characters (resource/v1 DriverNameMaxLength), as the API checks,
  // with a dot, like the DeviceClass selects.
  ERDMA_TRY(
      cfg::check_name(out.driver_name, common::NameRule::Dns1123Subdomain, "dra.driverName", "a DRA driver name"));
  if (out.driver_name.size() > kMaxDriverNameLen || out.driver_name.find('.') == std::string::npos) {
    return cfg::error("dra.driverName", "must be at most " + std::to_string(kMaxDriverNameLen) +
                                            " characters with a dot, like the DeviceClass selects (e.g. "
                                            "erdma.aliyun.com), got " +
                                            json_quote(out.driver_name));
  }
  for (auto [key, field] : {std::pair<const char*, std::string*>{"registryDir", &out.registry_dir},
                            {"pluginDir", &out.plugin_dir},
                            {"cdiDir", &out.cdi_dir}}) {
    const std::string path = std::string("dra.") + key;
    ERDMA_TRY_ASSIGN(auto dir, cfg::get_string(*dra, key, path, *field));
    ERDMA_TRY(check_dir(dir, path));
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    *field = dir;
  }
  ERDMA_TRY_ASSIGN(auto hook_dir, cfg::get_string(*dra, "hookDir", "dra.hookDir", out.hook_dir));
  if (!hook_dir.empty()) ERDMA_TRY(check_dir(hook_dir, "dra.hookDir"));
  out.hook_dir = hook_dir.empty() ? hook_dir : cfg::trim_trailing_slashes(hook_dir);
  if (out.hook_dir.size() + 1 + std::string_view(ERDMA_CDI_HOOK_SOCKET).size() > kMaxUnixPathLen) {
    return cfg::error("dra.hookDir", "too long: " + out.hook_dir + "/" + ERDMA_CDI_HOOK_SOCKET + " must stay within " +
                                         std::to_string(kMaxUnixPathLen) + " bytes");
  }
  ERDMA_TRY_ASSIGN(out.hook_source, cfg::get_string(*dra, "hookSource", "dra.hookSource", out.hook_source));
  if (!out.hook_source.empty()) ERDMA_TRY(check_dir(out.hook_source, "dra.hookSource"));
  if (out.registration_socket_path().size() > kMaxUnixPathLen || out.plugin_socket_path().size() > kMaxUnixPathLen) {
    return cfg::error("dra.pluginDir", "too long with dra.registryDir and dra.driverName: unix socket paths must stay "
                                       "within " +
                                           std::to_string(kMaxUnixPathLen) + " bytes");
  }
  ERDMA_TRY_ASSIGN(auto health, cfg::get_string(*dra, "healthPolicy", "dra.healthPolicy",
                                                out.health == DraHealthPolicy::Taint ? "taint" : "omit"));
  if (health == "taint") {
    out.health = DraHealthPolicy::Taint;
  } else if (health == "omit") {
    out.health = DraHealthPolicy::Omit;
  } else {
    return cfg::error("dra.healthPolicy", "must be taint (a down card stays published with a NoSchedule taint) or "
                                          "omit (it leaves the slice; for clusters without device taints), got " +
                                              json_quote(health));
  }
  ERDMA_TRY_ASSIGN(auto slots, cfg::get_int(*dra, "slotsPerDevice", "dra.slotsPerDevice", out.slots_per_device, 0,
                                            kMaxSlotsPerDevice));
  out.slots_per_device = static_cast<unsigned>(slots);
  ERDMA_TRY_ASSIGN(out.node_name, cfg::get_string(*dra, "nodeName", "dra.nodeName", out.node_name));
  if (!out.node_name.empty()) {
    if (auto named = cfg::check_name(out.node_name, common::NameRule::Dns1123Subdomain, "dra.nodeName", "a node name");
        !named) {
      return make_error(ErrorCode::InvalidArgument,
                        named.error().message + "; leave it empty to take NODE_NAME from the environment");
    }
  }
  return {};
}

}  // namespace

std::string_view to_string(DriverMode mode) noexcept {
  switch (mode) {
    case DriverMode::Default: return "default";
    case DriverMode::Compat: return "compat";
    case DriverMode::Ofed: return "ofed";
    case DriverMode::Auto: return "auto";
  }
  return "default";
}

PnetId default_pnet_id() {
  static const PnetId id = *PnetId::parse("ERDMA");
  return id;
}

Result<AgentConfig> AgentConfig::load(const json& doc) {
  AgentConfig cfg;
  if (doc.is_null()) return cfg;
  if (!doc.is_object()) return cfg::type_error(doc, "config", "a map at the top level");
  ERDMA_TRY(cfg::check_keys(doc, "",
                            {"resourceName", "devicePluginDir", "slotsPerDevice", "devices", "metricsListen", "smcr",
                             "podResourcesSocket", "criSocket", "procRoot", "allocateAllDevices", "ncclEnv",
                             "ncclSocketIfname", "driver", "nfdFeatureFile", "dra"}));

  ERDMA_TRY_ASSIGN(auto resource, cfg::get_string(doc, "resourceName", "resourceName", cfg.resource_name));
  ERDMA_TRY(cfg::check_name(resource, common::NameRule::ExtendedResourceName, "resourceName"));
  cfg.resource_name = resource;

  ERDMA_TRY_ASSIGN(auto dir, cfg::get_string(doc, "devicePluginDir", "devicePluginDir", cfg.device_plugin_dir));
  ERDMA_TRY(check_dir(dir, "devicePluginDir"));
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  cfg.device_plugin_dir = dir;
  if (cfg.plugin_socket_path().size() > kMaxUnixPathLen || cfg.kubelet_socket_path().size() > kMaxUnixPathLen) {
    return cfg::error("devicePluginDir", "too long: unix socket paths inside it must stay within " +
                                             std::to_string(kMaxUnixPathLen) + " bytes");
  }

  ERDMA_TRY_ASSIGN(auto slots,
                   cfg::get_int(doc, "slotsPerDevice", "slotsPerDevice", cfg.slots_per_device, 1, kMaxSlotsPerDevice));
  cfg.slots_per_device = static_cast<unsigned>(slots);

  ERDMA_TRY_ASSIGN(auto metrics, cfg::get_string(doc, "metricsListen", "metricsListen", cfg.metrics_listen));
  if (!metrics.empty()) {
    if (auto a = common::parse_listen_address(metrics); !a) return cfg::error("metricsListen", a.error().message);
  }
  cfg.metrics_listen = metrics;

  if (const json* devices = cfg::get(doc, "devices")) {
    if (!devices->is_object()) return cfg::type_error(*devices, "devices", "a map");
    ERDMA_TRY(cfg::check_keys(*devices, "devices", {"source", "drivers", "static", "rescanSeconds"}));
    ERDMA_TRY_ASSIGN(auto source, cfg::get_string(*devices, "source", "devices.source", "verbs"));
    if (source == "verbs") {
      cfg.source = DeviceSourceKind::Verbs;
    } else if (source == "static") {
      cfg.source = DeviceSourceKind::Static;
    } else {
      return cfg::error("devices.source", "must be \"verbs\" (libibverbs discovery) or \"static\" (the devices.static "
                                          "list), got " +
                                              json_quote(source));
    }
    ERDMA_TRY_ASSIGN(auto drivers, load_drivers(*devices, "devices.drivers"));
    cfg.drivers = std::move(drivers);
    ERDMA_TRY_ASSIGN(auto st, load_static(*devices, "devices.static", cfg.slots_per_device));
    if (!st.empty() && cfg.source != DeviceSourceKind::Static) {
      return cfg::error("devices.static", "is only read with devices.source: static (source is verbs)");
    }
    cfg.static_devices = std::move(st);
    ERDMA_TRY_ASSIGN(auto rescan,
                     cfg::get_int(*devices, "rescanSeconds", "devices.rescanSeconds", cfg.rescan_seconds, 1, 3600));
    cfg.rescan_seconds = static_cast<unsigned>(rescan);
  }

  ERDMA_TRY(load_smcr(doc, cfg.smcr));
  if (cfg.smcr.resource_name == cfg.resource_name) {
    return cfg::error("smcr.resourceName", "must differ from resourceName (" + cfg.resource_name +
                                               "): the SMC-R resource is a second resource, without RDMA devices");
  }
  for (auto [key, field] : {std::pair<const char*, bool*>{"allocateAllDevices", &cfg.allocate_all_devices},
                            {"ncclEnv", &cfg.nccl_env},
                            {"ncclSocketIfname", &cfg.nccl_socket_ifname}}) {
    ERDMA_TRY_ASSIGN(auto v, cfg::get_bool(doc, key, key, *field));
    *field = v;
  }
  if (cfg.nccl_socket_ifname && !cfg.nccl_env) {
    return cfg::error("ncclSocketIfname", "needs ncclEnv: true (ncclEnv: false turns every NCCL_* setting off)");
  }
  ERDMA_TRY(load_driver(doc, cfg.driver));
  ERDMA_TRY_ASSIGN(auto nfd, cfg::get_string(doc, "nfdFeatureFile", "nfdFeatureFile", cfg.nfd_feature_file));
  if (!nfd.empty()) {
    ERDMA_TRY(check_dir(nfd, "nfdFeatureFile"));
    const auto slash = nfd.rfind('/');
    const std::string base = nfd.substr(slash + 1);
    if (base.empty() || base.front() == '.') {
      return cfg::error("nfdFeatureFile", "must name a file whose name does not start with '.' (NFD ignores those), "
                                          "e.g. /etc/kubernetes/node-feature-discovery/features.d/erdma, got " +
                                              json_quote(nfd));
    }
  }
  cfg.nfd_feature_file = nfd;
  ERDMA_TRY_ASSIGN(auto podres, get_socket_path(doc, "podResourcesSocket", cfg.pod_resources_socket));
  cfg.pod_resources_socket = podres;
  ERDMA_TRY_ASSIGN(auto cri, get_socket_path(doc, "criSocket", cfg.cri_socket));
  cfg.cri_socket = cri;
  ERDMA_TRY_ASSIGN(auto proc, cfg::get_string(doc, "procRoot", "procRoot", cfg.proc_root));
  ERDMA_TRY(check_dir(proc, "procRoot"));
  while (proc.size() > 1 && proc.back() == '/') proc.pop_back();
  cfg.proc_root = proc;
  ERDMA_TRY(load_dra(doc, cfg.dra));
  return cfg;
}

json AgentConfig::to_json() const {
  json statics = json::array();
  for (const auto& d : static_devices) {
    statics.push_back({{"name", d.name},
                       {"uverbs", d.uverbs},
                       {"netdev", d.netdev},
                       {"state", std::string(to_string(d.ports.empty() ? PortState::Unknown : d.ports.front().state))},
                       {"numaNode", d.numa_node}});
  }
  return json{
      {"resourceName", resource_name},
      {"devicePluginDir", device_plugin_dir},
      {"slotsPerDevice", slots_per_device},
      {"devices",
       {{"source", source == DeviceSourceKind::Static ? "static" : "verbs"},
        {"drivers", drivers},
        {"static", statics},
        {"rescanSeconds", rescan_seconds}}},
      {"metricsListen", metrics_listen},
      {"smcr",
       {{"enabled", smcr.enabled},
        {"pnetId", smcr.pnet_id.str()},
        {"ueid", smcr.ueid},
        {"sysctls", smcr.sysctls},
        {"podInterface", smcr.pod_interface},
        {"preloadSource", smcr.preload_source},
        {"preloadHostDir", smcr.preload_host_dir},
        {"callTimeoutMs", smcr.call_timeout_ms},
        {"statsSeconds", smcr.stats_seconds},
        {"resourceName", smcr.resource_name},
        {"slotsPerDevice", smcr.slots_per_device},
        {"allowedNamespaces", smcr.allowed_namespaces},
        {"smcdLoopback", smcr.smcd_loopback}}},
      {"allocateAllDevices", allocate_all_devices},
      {"ncclEnv", nccl_env},
      {"ncclSocketIfname", nccl_socket_ifname},
      {"driver",
       {{"prefer", to_string(driver.prefer)}, {"loadModules", driver.load_modules}, {"modprobe", driver.modprobe}}},
      {"nfdFeatureFile", nfd_feature_file},
      {"podResourcesSocket", pod_resources_socket},
      {"criSocket", cri_socket},
      {"procRoot", proc_root},
      {"dra",
       {{"enabled", dra.enabled},
        {"extendedResource", dra.extended_resource},
        {"driverName", dra.driver_name},
        {"registryDir", dra.registry_dir},
        {"pluginDir", dra.plugin_dir},
        {"cdiDir", dra.cdi_dir},
        {"healthPolicy", dra.health == DraHealthPolicy::Taint ? "taint" : "omit"},
        {"slotsPerDevice", dra.slots_per_device},
        {"nodeName", dra.node_name},
        {"hookDir", dra.hook_dir},
        {"hookSource", dra.hook_source}}}};
}

std::string AgentConfig::plugin_socket_path() const {
  return device_plugin_dir + (device_plugin_dir == "/" ? "" : "/") + kPluginSocketName;
}

bool namespace_allowed(const std::vector<std::string>& allowed, std::string_view namespace_) {
  return allowed.empty() || std::find(allowed.begin(), allowed.end(), namespace_) != allowed.end();
}

bool SmcrConfig::allows(std::string_view namespace_) const { return namespace_allowed(allowed_namespaces, namespace_); }

std::string AgentConfig::smcr_plugin_socket_path() const {
  return device_plugin_dir + (device_plugin_dir == "/" ? "" : "/") + kSmcrPluginSocketName;
}

std::string DraConfig::registration_socket_path() const {
  return registry_dir + (registry_dir == "/" ? "" : "/") + driver_name + "-reg.sock";
}

std::string DraConfig::plugin_socket_dir() const { return plugin_dir + (plugin_dir == "/" ? "" : "/") + driver_name; }

std::string DraConfig::plugin_socket_path() const { return plugin_socket_dir() + "/dra.sock"; }

std::string DraConfig::checkpoint_path() const { return plugin_socket_dir() + "/checkpoint.json"; }

std::string AgentConfig::kubelet_socket_path() const {
  return device_plugin_dir + (device_plugin_dir == "/" ? "" : "/") + kKubeletSocketName;
}

}  // namespace erdma::agent
