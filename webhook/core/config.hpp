// Webhook configuration: what to inject and where. Loaded once from YAML/JSON, validated, then
// immutable; a running webhook never sees an invalid Config. Share it as shared_ptr<const Config>.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/contract.hpp"
#include "common/result.hpp"

namespace erdma::webhook {

struct EnvVar {
  std::string name;
  std::string value;
};

// A hostPath volume mounted into every eRDMA container.
struct HostMount {
  std::string name;        // volume name, a DNS-1123 label
  std::string host_path;   // absolute path on the node
  std::string mount_path;  // absolute path in the container
  bool read_only = true;
  std::string type;  // hostPath type ("" = no check), e.g. "CharDevice", "Directory"
};

// How the preload library reaches an SMC-R pod's containers.
enum class LibraryFrom {
  // erdma-agent's Allocate answer mounts the library directory read-only into every container
  // holding the eRDMA resource; the webhook gives the resource to each regular container of an
  // SMC-R pod and preloads exactly the containers that hold it. No volume in the pod spec, so
  // Pod Security "baseline" and "restricted" namespaces accept the pod.
  DevicePlugin,
  // A hostPath volume of preloadHostDir mounted into every container: for nodes whose device
  // plugin for the resource is not erdma-agent's. Refused where hostPath volumes are.
  HostPath,
};
[[nodiscard]] std::string_view to_string(LibraryFrom f) noexcept;

struct SmcrSettings {
  LibraryFrom library_from = LibraryFrom::DevicePlugin;
  std::string preload_host_dir{contract::kPreloadHostDir};
  std::string mount_path{contract::kPreloadMountPath};
  // Always contract::kPreloadLibrary, the name the agent installs; `smcr.library` accepts only it.
  std::string library{contract::kPreloadLibrary};
  std::vector<EnvVar> env;  // SMC tuning, e.g. SMC_SNDBUF
  bool add_resource = true;
  // With libraryFrom: devicePlugin, the resource SMC-R containers are given: erdma-agent's
  // library-only resource (no RDMA device in the container). "" = resourceName, as before the
  // agent served it (nodes with an older agent).
  std::string resource_name{contract::kSmcrResourceName};
  // The namespaces whose pods may use SMC-R (the cluster admin's decision: SMC-R traffic bypasses
  // CNI encryption and packet-level NetworkPolicy); empty = every namespace the webhook sees.
  std::vector<std::string> allowed_namespaces;
  [[nodiscard]] bool allows(std::string_view namespace_) const;
};

// JSON text fragments derived from the settings at load time, so the request path only copies.
struct RenderedFragments {
  std::vector<std::string> erdma_env;      // {"name":..,"value":..} per erdmaEnv entry
  std::vector<std::string> smcr_env;       // the same for smcr.env
  std::vector<std::string> mount_volumes;  // hostPath volume per deviceMounts entry
  std::vector<std::string> mount_mounts;   // volumeMount per deviceMounts entry
  std::string preload_path;                // <mountPath>/<library>
  std::string preload_env;                 // {"name":"LD_PRELOAD","value":<preload_path>}
  std::string preload_volume;              // the erdma-smc-preload hostPath volume (libraryFrom: hostPath)
  std::string preload_mount;               // its read-only volumeMount (libraryFrom: hostPath)
  std::string added_resource;              // the resource the webhook gives SMC-R containers
  std::string resource_token;              // added_resource escaped as a JSON Pointer token
  std::string resource_one;                // {"<added_resource>":"1"}
};

class Config {
 public:
  // Builds a Config from a parsed document (YAML or JSON). Every key is optional; missing keys
  // take the defaults of docs/design.md. Unknown keys, wrong types and invalid values are errors whose
  // message names the key, e.g. `smcr.mountPath: must be an absolute path, got "lib"`.
  [[nodiscard]] static Result<Config> load(const nlohmann::json& doc);

  // The defaults (what load({}) returns).
  [[nodiscard]] static Config defaults();

  // The effective configuration as a document that load() accepts.
  [[nodiscard]] nlohmann::json to_json() const;

  const std::string& resource_name() const noexcept { return resource_name_; }
  const std::vector<std::string>& excluded_namespaces() const noexcept { return excluded_namespaces_; }
  const std::vector<EnvVar>& erdma_env() const noexcept { return erdma_env_; }
  const std::vector<HostMount>& device_mounts() const noexcept { return device_mounts_; }
  const SmcrSettings& smcr() const noexcept { return smcr_; }
  const RenderedFragments& rendered() const noexcept { return rendered_; }

  [[nodiscard]] bool is_excluded_namespace(std::string_view ns) const noexcept;

 private:
  Config() = default;
  void render();

  std::string resource_name_;
  std::vector<std::string> excluded_namespaces_;
  std::vector<EnvVar> erdma_env_;
  std::vector<HostMount> device_mounts_;
  SmcrSettings smcr_;
  RenderedFragments rendered_;
};

using ConfigPtr = std::shared_ptr<const Config>;

}  // namespace erdma::webhook
