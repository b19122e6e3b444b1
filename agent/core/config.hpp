// erdma-agent configuration: the device plugin's resource, where kubelet's sockets live, how many
// shareable slots each device offers, where devices come from, where metrics are served, and
// SMC-R: the host's pnet entries and UEID, what each SMC-R pod's network namespace gets, where the
// preload library goes, and the kubelet / container runtime / procfs paths pod setup uses.
// Loaded once from a YAML/JSON document and validated; a running agent never sees an invalid one.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/core/pnet.hpp"
#include "agent/core/rdma_device.hpp"
#include "common/contract.hpp"
#include "common/result.hpp"

namespace erdma::agent {

// The plugin's socket file name inside devicePluginDir (docs/design.md: .../device-plugins/erdma.sock).
inline constexpr const char* kPluginSocketName = "erdma.sock";
// The SMC-R resource's socket (smcr.resourceName), beside it.
inline constexpr const char* kSmcrPluginSocketName = "erdma-smcr.sock";
// Kubelet's registration socket inside devicePluginDir.
inline constexpr const char* kKubeletSocketName = "kubelet.sock";
// sockaddr_un.sun_path holds 108 bytes including the terminating NUL.
inline constexpr size_t kMaxUnixPathLen = 107;
inline constexpr unsigned kMaxSlotsPerDevice = 1000;

enum class DeviceSourceKind { Verbs, Static };

// "ERDMA": smcr.pnetId when the config does not set it.
[[nodiscard]] PnetId default_pnet_id();

// smcr.*: SMC-R on the node and in SMC-R pods. Values are validated as the kernel validates them.
struct SmcrConfig {
  bool enabled = true;                         // false: no host setup, no pod setup, no preload install
  PnetId pnet_id = default_pnet_id();          // PNETID for every eRDMA port and netdev, parsed at load
  std::string ueid = "ERDMA-CONTROLLER";       // SMC-Rv2 UEID, the same on every node; "" = leave the table alone
  std::map<std::string, std::string> sysctls;  // net.smc.* written in each SMC-R pod's netns
  std::string pod_interface = "eth0";          // the pod-side interface that gets `-> pnetId`
  std::string preload_source{contract::kPreloadImagePath};  // "" = do not install
  std::string preload_host_dir{contract::kPreloadHostDir};
  unsigned call_timeout_ms = 5000;  // each PodResources / CRI call (always inside PreStart's budget)
  unsigned stats_seconds = 30;      // how often the kernel's SMC statistics are read for metrics
  // The resource SMC-R containers hold (contract::kSmcrResourceName): Allocate mounts only the
  // preload library. "" = not advertised (the webhook then gives SMC-R containers resourceName).
  std::string resource_name{contract::kSmcrResourceName};
  // Its slots per device: one per SMC-R container, so enough for every container a node runs.
  unsigned slots_per_device = 256;
  // The namespaces whose pods may use SMC-R (the admin's decision: SMC-R traffic bypasses CNI
  // encryption and packet-level NetworkPolicy); empty = every namespace. A pod elsewhere that
  // asks for it is not set up (result not_allowed) and stays on TCP.
  std::vector<std::string> allowed_namespaces;
  // SMC-D over the kernel's loopback device (DIBS_LO, 7.x) for connections between pods of one
  // node: the kernel offers it before SMC-R, across network namespaces, with nothing to set up.
  // true leaves the kernel as it is (SMC-D, the shorter path: no NIC, no RDMA queue pairs); false
  // turns it off with a pnet entry on the loopback device that no netdev carries, so pods of one
  // node use SMC-R like pods of two. No effect on a kernel without the device.
  bool smcd_loopback = true;

  [[nodiscard]] bool allows(std::string_view namespace_) const;
};

// Whether `allowed` (a smcr.allowedNamespaces list; empty = every namespace) admits `namespace_`:
// SmcrConfig::allows, for holders of the list alone (the DRA service). Pure.
[[nodiscard]] bool namespace_allowed(const std::vector<std::string>& allowed, std::string_view namespace_);

// driver.*: which erdma driver mode this node should run (see docs/node-preparation.md).
enum class DriverMode { Default, Compat, Ofed, Auto };
[[nodiscard]] std::string_view to_string(DriverMode mode) noexcept;

struct DriverConfig {
  DriverMode prefer = DriverMode::Default;  // the seed's SMC-R application nodes run `default`
  // loadModules: modprobe the missing modules plan_module_loads() names (smc, smc_diag,
  // nvidia_peermem; erdma only in default mode). Off by default: it needs CAP_SYS_MODULE and the
  // host's /lib/modules (manifests/load-modules).
  bool load_modules = false;
  std::string modprobe = "/sbin/modprobe";  // driver.modprobe: the modprobe the agent runs
};

// dra.*: the DRA (Dynamic Resource Allocation) driver beside the device plugin (docs/dra.md).
enum class DraHealthPolicy { Taint, Omit };  // agent/core/dra_slices.hpp HealthPolicy
struct DraConfig {
  bool enabled = false;  // publish ResourceSlices and serve the kubelet's DRA plugin API
  // true: resourceName (aliyun/erdma) is served by DRA through the DeviceClass's
  // extendedResourceName, so the device plugin does not register it on this node (a node that
  // advertises the resource through a device plugin keeps it there: the scheduler prefers that).
  bool extended_resource = false;
  std::string driver_name{contract::kDraDriverName};
  std::string registry_dir = "/var/lib/kubelet/plugins_registry";  // <driver>-reg.sock
  std::string plugin_dir = "/var/lib/kubelet/plugins";             // <driver>/dra.sock, checkpoint.json
  std::string cdi_dir = "/var/run/cdi";                            // the runtime's dynamic CDI specs
  DraHealthPolicy health = DraHealthPolicy::Taint;
  // > 0: a card may be held by several claims at once, each taking one of this many slots
  // (consumable capacity, on by default from Kubernetes 1.36); 0: one claim per card.
  unsigned slots_per_device = 64;
  // "" = the environment variable NODE_NAME (the DaemonSet sets it from spec.nodeName).
  std::string node_name;
  // Pods on the pod network with SMC-R claims (agent/core/cdi_hook.hpp): the agent installs
  // hook_source as <hook_dir>/erdma-cdi-hook and serves <hook_dir>/hook.sock; SMC-R claims' CDI
  // specs name the hook. hook_dir "" = no hook: SMC-R claims carry SMC-R for hostNetwork pods only.
  std::string hook_dir{contract::kCdiHookHostDir};
  std::string hook_source{contract::kCdiHookImagePath};

  [[nodiscard]] std::string registration_socket_path() const;  // registryDir/<driver>-reg.sock
  [[nodiscard]] std::string plugin_socket_dir() const;         // pluginDir/<driver>
  [[nodiscard]] std::string plugin_socket_path() const;        // pluginDir/<driver>/dra.sock
  [[nodiscard]] std::string checkpoint_path() const;           // pluginDir/<driver>/checkpoint.json
};

struct AgentConfig {
  std::string resource_name{contract::kResourceName};
  std::string device_plugin_dir = "/var/lib/kubelet/device-plugins";
  unsigned slots_per_device = 64;
  DeviceSourceKind source = DeviceSourceKind::Verbs;
  std::vector<std::string> drivers{"erdma"};  // verbs source: drivers whose devices are advertised
  std::vector<RdmaDevice> static_devices;     // static source: the devices, as configured
  unsigned rescan_seconds = 5;                // periodic re-discovery (health changes are seen this fast)
  // Loopback by default: on the host network 0.0.0.0 would offer metrics and health to every
  // peer of the node. "" = no metrics endpoint (see docs/design.md "Metrics listen address").
  std::string metrics_listen = "127.0.0.1:9467";
  SmcrConfig smcr;
  bool allocate_all_devices = false;  // every container gets every device of the node
  bool nccl_env = true;               // Allocate sets NCCL_IB_HCA / NCCL_IB_GID_INDEX per device
  bool nccl_socket_ifname = false;    // ... and NCCL_SOCKET_IFNAME (right only for hostNetwork pods)
  DriverConfig driver;
  std::string nfd_feature_file;  // "" = none; else an NFD local feature file the agent keeps
  std::string pod_resources_socket = "/var/lib/kubelet/pod-resources/kubelet.sock";
  std::string cri_socket = "/run/containerd/containerd.sock";  // containerd's CRI endpoint
  std::string proc_root = "/proc";  // the host's procfs (a DaemonSet mounts it at e.g. /host/proc)
  DraConfig dra;

  // Builds a config from a parsed YAML/JSON document; every key is optional (missing or null keys
  // take the defaults above). Unknown keys, wrong types and invalid values are InvalidArgument
  // errors whose message starts with the key, e.g. `devices.static[1].uverbs: must look like
  // "uverbs0", got "/dev/uverbs0"`.
  [[nodiscard]] static Result<AgentConfig> load(const nlohmann::json& doc);

  // The effective configuration as a document load() accepts (defaults filled in).
  [[nodiscard]] nlohmann::json to_json() const;

  // devicePluginDir/erdma.sock and devicePluginDir/kubelet.sock.
  [[nodiscard]] std::string plugin_socket_path() const;
  [[nodiscard]] std::string smcr_plugin_socket_path() const;
  [[nodiscard]] std::string kubelet_socket_path() const;
};

}  // namespace erdma::agent
