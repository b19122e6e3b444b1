// Loading and validating the webhook configuration (see config.hpp).
#include "webhook/core/config.hpp"

#include <algorithm>
#include <initializer_list>
#include <set>

#include "common/config_reader.hpp"
#include "common/json_pointer.hpp"
#include "common/json_types.hpp"
#include "common/text.hpp"
#include "webhook/core/names.hpp"

namespace erdma::webhook {
namespace {

using common::json_quote;
using nlohmann::json;

namespace cfg = common::config;

// Kubernetes' classic environment variable name rule: [-._a-zA-Z][-._a-zA-Z0-9]*.
bool is_env_name(std::string_view s) {
  if (s.empty()) return false;
  auto ok = [](char c, bool first) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '-' || c == '.' ||
           (!first && c >= '0' && c <= '9');
  };
  for (size_t i = 0; i < s.size(); ++i) {
    if (!ok(s[i], i == 0)) return false;
  }
  return true;
}

using cfg::check_abs_path;
using cfg::trim_trailing_slashes;

Result<std::vector<EnvVar>> load_env_list(const json& obj, const char* key, const std::string& path,
                                          std::vector<EnvVar> fallback) {
  const json* v = cfg::get(obj, key);
  if (v == nullptr) return fallback;
  ERDMA_TRY(cfg::expect_list(*v, path, "a list of {name, value}"));
  std::vector<EnvVar> out;
  std::set<std::string> seen;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& item = (*v)[i];
    const std::string p = path + "[" + std::to_string(i) + "]";
    ERDMA_TRY(cfg::expect_map(item, p, "a map with name and value"));
    ERDMA_TRY(cfg::check_keys(item, p, {"name", "value"}));
    ERDMA_TRY_ASSIGN(auto name, cfg::get_string(item, "name", p + ".name", ""));
    if (!is_env_name(name)) {
      return cfg::error(p + ".name", "must be a variable name ([-._a-zA-Z][-._a-zA-Z0-9]*), got " + json_quote(name));
    }
    if (name == kLdPreload) {
      return cfg::error(p + ".name", "LD_PRELOAD is managed by the webhook for SMC-R pods (smcr)");
    }
    if (!seen.insert(name).second) return cfg::error(p + ".name", "duplicate variable " + name);
    auto it = item.find("value");
    if (it == item.end()) return cfg::error(p + ".value", "missing (use \"\" for an empty value)");
    if (!it->is_string()) return cfg::type_error(*it, p + ".value", "a string");
    out.push_back(EnvVar{name, it->get<std::string>()});
  }
  return out;
}

const char* const kHostPathTypes[] = {"",       "DirectoryOrCreate", "Directory",  "FileOrCreate", "File",
                                      "Socket", "CharDevice",        "BlockDevice"};

Result<std::vector<HostMount>> load_mounts(const json& obj, const std::string& path) {
  const json* v = cfg::get(obj, "deviceMounts");
  if (v == nullptr) return std::vector<HostMount>{};
  ERDMA_TRY(cfg::expect_list(*v, path, "a list of {name, hostPath, mountPath, readOnly, type}"));
  std::vector<HostMount> out;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& item = (*v)[i];
    const std::string p = path + "[" + std::to_string(i) + "]";
    ERDMA_TRY(cfg::expect_map(item, p));
    ERDMA_TRY(cfg::check_keys(item, p, {"name", "hostPath", "mountPath", "readOnly", "type"}));
    HostMount m;
    ERDMA_TRY_ASSIGN(auto name, cfg::get_string(item, "name", p + ".name", ""));
    ERDMA_TRY_ASSIGN(auto host, cfg::get_string(item, "hostPath", p + ".hostPath", ""));
    ERDMA_TRY_ASSIGN(auto mount, cfg::get_string(item, "mountPath", p + ".mountPath", ""));
    ERDMA_TRY_ASSIGN(auto ro, cfg::get_bool(item, "readOnly", p + ".readOnly", true));
    ERDMA_TRY_ASSIGN(auto type, cfg::get_string(item, "type", p + ".type", ""));
    if (name.empty()) return cfg::error(p + ".name", "missing (the volume name, a DNS-1123 label)");
    ERDMA_TRY(cfg::check_name(name, common::NameRule::Dns1123Label, p + ".name", "a volume name"));
    if (host.empty()) return cfg::error(p + ".hostPath", "missing");
    if (mount.empty()) return cfg::error(p + ".mountPath", "missing");
    ERDMA_TRY(check_abs_path(host, p + ".hostPath"));
    ERDMA_TRY(check_abs_path(mount, p + ".mountPath"));
    if (std::find(std::begin(kHostPathTypes), std::end(kHostPathTypes), type) == std::end(kHostPathTypes)) {
      return cfg::error(p + ".type", "must be one of DirectoryOrCreate, Directory, FileOrCreate, File, Socket, "
                                     "CharDevice, BlockDevice or empty, got " +
                                         json_quote(type));
    }
    m.name = name;
    m.host_path = trim_trailing_slashes(host);
    m.mount_path = trim_trailing_slashes(mount);
    m.read_only = ro;
    m.type = type;
    for (const auto& other : out) {
      if (other.name == m.name) return cfg::error(p + ".name", "duplicate volume name " + m.name);
      if (other.mount_path == m.mount_path) return cfg::error(p + ".mountPath", "duplicate mountPath " + m.mount_path);
    }
    if (m.name == kPreloadVolumeName) {
      return cfg::error(p + ".name", std::string(kPreloadVolumeName) + " is reserved for the SMC-R preload volume");
    }
    out.push_back(std::move(m));
  }
  return out;
}

std::string env_fragment(const EnvVar& e) {
  std::string s = "{\"name\":";
  common::append_json_string(s, e.name);
  s += ",\"value\":";
  common::append_json_string(s, e.value);
  s += '}';
  return s;
}

std::string volume_fragment(std::string_view name, std::string_view host_path, std::string_view type) {
  std::string s = "{\"name\":";
  common::append_json_string(s, name);
  s += ",\"hostPath\":{\"path\":";
  common::append_json_string(s, host_path);
  if (!type.empty()) {
    s += ",\"type\":";
    common::append_json_string(s, type);
  }
  s += "}}";
  return s;
}

std::string mount_fragment(std::string_view name, std::string_view mount_path, bool read_only) {
  std::string s = "{\"name\":";
  common::append_json_string(s, name);
  s += ",\"mountPath\":";
  common::append_json_string(s, mount_path);
  if (read_only) s += ",\"readOnly\":true";
  s += '}';
  return s;
}

}  // namespace

std::string_view to_string(LibraryFrom f) noexcept { return f == LibraryFrom::HostPath ? "hostPath" : "devicePlugin"; }

Config Config::defaults() {
  Config c;
  c.resource_name_ = std::string(contract::kResourceName);
  c.excluded_namespaces_ = {"kube-system", "erdma-system"};
  // No NCCL env by default: erdma-agent's Allocate answer names exactly the container's devices
  // (NCCL_IB_HCA) with their GID index, and a pod-spec value would win over it in kubelet's merge.
  c.render();
  return c;
}

Result<Config> Config::load(const json& doc) {
  Config c = defaults();
  if (doc.is_null()) return c;
  if (!doc.is_object()) {
    return cfg::type_error(doc, "config", "a map at the top level");
  }
  ERDMA_TRY(cfg::check_keys(doc, "", {"resourceName", "excludedNamespaces", "erdmaEnv", "deviceMounts", "smcr"}));

  ERDMA_TRY_ASSIGN(auto rn, cfg::get_string(doc, "resourceName", "resourceName", c.resource_name_));
  ERDMA_TRY(cfg::check_name(rn, common::NameRule::ExtendedResourceName, "resourceName"));
  c.resource_name_ = rn;

  ERDMA_TRY_ASSIGN(c.excluded_namespaces_,
                   cfg::get_namespace_list(doc, "excludedNamespaces", "excludedNamespaces", c.excluded_namespaces_));

  ERDMA_TRY_ASSIGN(auto env, load_env_list(doc, "erdmaEnv", "erdmaEnv", c.erdma_env_));
  c.erdma_env_ = std::move(env);

  ERDMA_TRY_ASSIGN(auto mounts, load_mounts(doc, "deviceMounts"));
  c.device_mounts_ = std::move(mounts);

  if (const json* v = cfg::get(doc, "smcr"); v != nullptr) {
    const json& s = *v;
    ERDMA_TRY(cfg::expect_map(s, "smcr"));
    ERDMA_TRY(cfg::check_keys(s, "smcr",
                              {"libraryFrom", "preloadHostDir", "mountPath", "library", "env", "addResource",
                               "resourceName", "allowedNamespaces"}));
    ERDMA_TRY_ASSIGN(
        auto from, cfg::get_string(s, "libraryFrom", "smcr.libraryFrom", std::string(to_string(c.smcr_.library_from))));
    if (from == to_string(LibraryFrom::DevicePlugin)) {
      c.smcr_.library_from = LibraryFrom::DevicePlugin;
    } else if (from == to_string(LibraryFrom::HostPath)) {
      c.smcr_.library_from = LibraryFrom::HostPath;
    } else {
      return cfg::error("smcr.libraryFrom",
                        "must be \"devicePlugin\" (erdma-agent mounts the library) or \"hostPath\" " +
                            std::string("(a hostPath volume, for another device plugin), got ") + json_quote(from));
    }
    ERDMA_TRY_ASSIGN(auto host, cfg::get_string(s, "preloadHostDir", "smcr.preloadHostDir", c.smcr_.preload_host_dir));
    ERDMA_TRY(check_abs_path(host, "smcr.preloadHostDir"));
    ERDMA_TRY_ASSIGN(auto mount, cfg::get_string(s, "mountPath", "smcr.mountPath", c.smcr_.mount_path));
    ERDMA_TRY(check_abs_path(mount, "smcr.mountPath"));
    ERDMA_TRY_ASSIGN(auto lib, cfg::get_string(s, "library", "smcr.library", c.smcr_.library));
    ERDMA_TRY_ASSIGN(auto smc_env, load_env_list(s, "env", "smcr.env", {}));
    ERDMA_TRY_ASSIGN(auto add, cfg::get_bool(s, "addResource", "smcr.addResource", c.smcr_.add_resource));
    c.smcr_.preload_host_dir = trim_trailing_slashes(host);
    c.smcr_.mount_path = trim_trailing_slashes(mount);
    c.smcr_.library = lib;
    c.smcr_.env = std::move(smc_env);
    c.smcr_.add_resource = add;
    ERDMA_TRY_ASSIGN(auto smcr_resource,
                     cfg::get_string(s, "resourceName", "smcr.resourceName", c.smcr_.resource_name));
    if (!smcr_resource.empty()) {
      if (auto named = cfg::check_name(smcr_resource, common::NameRule::ExtendedResourceName, "smcr.resourceName");
          !named) {
        return make_error(ErrorCode::InvalidArgument, named.error().message + ", or \"\" to give SMC-R containers "
                                                                              "resourceName");
      }
    }
    c.smcr_.resource_name = smcr_resource;
    ERDMA_TRY_ASSIGN(c.smcr_.allowed_namespaces,
                     cfg::get_namespace_list(s, "allowedNamespaces", "smcr.allowedNamespaces", {}));
  }
  if (c.smcr_.resource_name == c.resource_name_) {
    return cfg::error("smcr.resourceName", "must differ from resourceName (" + c.resource_name_ +
                                               "), or be \"\" to give SMC-R containers resourceName");
  }
  // erdma-agent installs the library under one fixed name; a pod told another name would find no
  // file, the dynamic loader would skip it with a warning, and the pod would stay on TCP unnoticed.
  if (c.smcr_.library != contract::kPreloadLibrary) {
    return cfg::error("smcr.library", "must be " + json_quote(std::string(contract::kPreloadLibrary)) +
                                          ", the file name erdma-agent installs (or left out), got " +
                                          json_quote(c.smcr_.library));
  }
  if (c.smcr_.mount_path.find_first_of(": \t\n\r") != std::string::npos) {
    return cfg::error("smcr.mountPath",
                      "must not contain ':' or blanks (LD_PRELOAD separators), got " + json_quote(c.smcr_.mount_path));
  }
  if (c.smcr_.mount_path == "/") return cfg::error("smcr.mountPath", "must not be \"/\"");
  // erdma-agent mounts the directory where the contract says; the webhook cannot move it.
  if (c.smcr_.library_from == LibraryFrom::DevicePlugin) {
    if (c.smcr_.mount_path != contract::kPreloadMountPath) {
      return cfg::error("smcr.mountPath", "can only be changed with smcr.libraryFrom: hostPath; erdma-agent mounts the "
                                          "library at " +
                                              std::string(contract::kPreloadMountPath) + ", got " +
                                              json_quote(c.smcr_.mount_path));
    }
  }
  for (const auto& m : c.device_mounts_) {
    if (m.mount_path == c.smcr_.mount_path) {
      return cfg::error("deviceMounts", "mountPath " + m.mount_path + " is also smcr.mountPath");
    }
  }
  c.render();
  return c;
}

void Config::render() {
  RenderedFragments r;
  for (const auto& e : erdma_env_) r.erdma_env.push_back(env_fragment(e));
  for (const auto& e : smcr_.env) r.smcr_env.push_back(env_fragment(e));
  for (const auto& m : device_mounts_) {
    r.mount_volumes.push_back(volume_fragment(m.name, m.host_path, m.type));
    r.mount_mounts.push_back(mount_fragment(m.name, m.mount_path, m.read_only));
  }
  r.preload_path = smcr_.mount_path + "/" + smcr_.library;
  r.preload_env = env_fragment(EnvVar{std::string(kLdPreload), r.preload_path});
  // DirectoryOrCreate: a node where the agent has not installed the library yet still starts the
  // pod; ld.so then skips the missing preload with a message and the application runs over TCP.
  r.preload_volume = volume_fragment(kPreloadVolumeName, smcr_.preload_host_dir, "DirectoryOrCreate");
  r.preload_mount = mount_fragment(kPreloadVolumeName, smcr_.mount_path, true);
  // hostPath: nodes whose device plugin is not erdma-agent, which serves only resourceName there.
  r.added_resource = smcr_.library_from == LibraryFrom::DevicePlugin && !smcr_.resource_name.empty()
                         ? smcr_.resource_name
                         : resource_name_;
  r.resource_token = common::escape_pointer_token(r.added_resource);
  r.resource_one = "{";
  common::append_json_string(r.resource_one, r.added_resource);
  r.resource_one += ":\"1\"}";
  rendered_ = std::move(r);
}

bool SmcrSettings::allows(std::string_view namespace_) const {
  return allowed_namespaces.empty() ||
         std::find(allowed_namespaces.begin(), allowed_namespaces.end(), namespace_) != allowed_namespaces.end();
}

bool Config::is_excluded_namespace(std::string_view ns) const noexcept {
  return std::find(excluded_namespaces_.begin(), excluded_namespaces_.end(), ns) != excluded_namespaces_.end();
}

json Config::to_json() const {
  auto env_list = [](const std::vector<EnvVar>& env) {
    json a = json::array();
    for (const auto& e : env) a.push_back({{"name", e.name}, {"value", e.value}});
    return a;
  };
  json mounts = json::array();
  for (const auto& m : device_mounts_) {
    json j = {{"name", m.name}, {"hostPath", m.host_path}, {"mountPath", m.mount_path}, {"readOnly", m.read_only}};
    if (!m.type.empty()) j["type"] = m.type;
    mounts.push_back(std::move(j));
  }
  return json{{"resourceName", resource_name_},
              {"excludedNamespaces", excluded_namespaces_},
              {"erdmaEnv", env_list(erdma_env_)},
              {"deviceMounts", std::move(mounts)},
              {"smcr",
               {{"libraryFrom", to_string(smcr_.library_from)},
                {"preloadHostDir", smcr_.preload_host_dir},
                {"mountPath", smcr_.mount_path},
                {"library", smcr_.library},
                {"env", env_list(smcr_.env)},
                {"addResource", smcr_.add_resource},
                {"resourceName", smcr_.resource_name},
                {"allowedNamespaces", smcr_.allowed_namespaces}}}};
}

}  // namespace erdma::webhook
