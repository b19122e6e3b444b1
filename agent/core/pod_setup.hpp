// Pure decisions of SMC-R pod setup: which pod owns the device IDs kubelet passed to
// PreStartContainer (from a PodResources List answer), which of the runtime's sandboxes is that
// pod's, whether the pod asks for SMC-R, and where its network namespace is (from the runtime's
// verbose sandbox info). The shell fetches the answers, these functions decide, the shell acts.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/contract.hpp"
#include "common/result.hpp"

namespace erdma::agent {

// The pod annotation that asks for SMC-R (common/contract.hpp); only "true" enables it.
using contract::kSmcrAnnotation;

// Limits on what the agent accepts from kubelet and the runtime (far above real values).
inline constexpr size_t kMaxPods = 10000;
inline constexpr size_t kMaxSandboxInfoBytes = 4u << 20;

// What PodResources List says about one pod: for each container, the device IDs per resource.
struct PodDevices {
  std::string namespace_;
  std::string name;
  struct Container {
    std::string name;
    std::map<std::string, std::vector<std::string>> devices;  // resource name -> device IDs
  };
  std::vector<Container> containers;
};

struct PodRef {
  std::string namespace_;
  std::string name;
  std::string container;
  friend bool operator==(const PodRef&, const PodRef&) = default;
};

// "ns/name".
[[nodiscard]] std::string to_string(const PodRef& pod);

// The container (and its pod) to which kubelet allocated every one of `device_ids` of `resource`.
// Errors: InvalidArgument when `device_ids` is empty; NotFound when no container holds them all
// (the pod may be gone, or kubelet's answer is stale); FailedPrecondition when several do (an
// inconsistent answer: device IDs are allocated to one container at a time).
[[nodiscard]] Result<PodRef> find_pod_for_devices(const std::vector<PodDevices>& pods, const std::string& resource,
                                                  const std::vector<std::string>& device_ids);

// One sandbox as the runtime lists it.
enum class SandboxState { Ready, NotReady };
struct SandboxSummary {
  std::string id;
  std::string pod_namespace;
  std::string pod_name;
  std::string pod_uid;
  uint32_t attempt = 0;
  SandboxState state = SandboxState::NotReady;
  int64_t created_at = 0;  // ns since the epoch
  std::map<std::string, std::string> annotations;
};

// The ready sandbox of `namespace_/name`; the newest one when a restart left several. NotFound
// when there is none (the pod is being deleted, or not started).
[[nodiscard]] Result<SandboxSummary> choose_sandbox(const std::vector<SandboxSummary>& sandboxes,
                                                    const std::string& namespace_, const std::string& name);

// True only for the exact annotation value "true".
[[nodiscard]] bool wants_smcr(const std::map<std::string, std::string>& annotations);

// Where a sandbox's network namespace is, from PodSandboxStatus (verbose).
struct SandboxNetns {
  bool host_network = false;        // the sandbox uses the node's network namespace
  std::optional<std::string> path;  // the netns file (a bind mount such as /var/run/netns/cni-...)
  std::optional<uint32_t> pid;      // the sandbox's process, for <procRoot>/<pid>/ns/net
  bool closed = false;              // the runtime says the netns is already torn down
};

// Reads the runtime's verbose info map. containerd (and CRI-O) put one JSON document under
// "info" holding "pid", "netNamespaceClosed" and the OCI "runtimeSpec", whose linux.namespaces
// entry of type "network" carries the path. `host_network_mode` is the CRI status's
// linux.namespaces.options.network == NODE. Unknown fields are ignored; malformed JSON, a
// document over kMaxSandboxInfoBytes, a relative or NUL-containing path or a pid outside
// 1..4194304 are InvalidArgument errors. A document without path and pid is not an error here
// (the caller decides).
[[nodiscard]] Result<SandboxNetns> parse_sandbox_netns(const std::map<std::string, std::string>& info,
                                                       bool host_network_mode);

// How one pod setup ended (the `result` label of erdma_agent_smcr_pod_setups_total).
enum class PodSetupResult {
  Configured,        // pnet entry (and sysctls) in place
  NotRequested,      // the pod does not ask for SMC-R
  NotAllowed,        // the pod asks for SMC-R in a namespace smcr.allowedNamespaces leaves out
  HostNetwork,       // the pod uses the node's netns: nothing to do, the host setup covers it
  HostNetnsRefused,  // the runtime names the host's netns for a pod-network sandbox: never touched
  PodNotFound,       // PodResources does not know the devices (yet, or any more)
  SandboxGone,       // no ready sandbox, or its netns vanished meanwhile
  Timeout,           // the budget ran out (a hung runtime or kernel)
  Failed,            // anything else; logged with the reason
};
inline constexpr PodSetupResult kAllPodSetupResults[] = {
    PodSetupResult::Configured,  PodSetupResult::NotRequested,     PodSetupResult::NotAllowed,
    PodSetupResult::HostNetwork, PodSetupResult::HostNetnsRefused, PodSetupResult::PodNotFound,
    PodSetupResult::SandboxGone, PodSetupResult::Timeout,          PodSetupResult::Failed};
[[nodiscard]] std::string_view to_string(PodSetupResult r) noexcept;

// The result a failed step maps to: NotFound -> SandboxGone (a vanished netns or sandbox),
// DeadlineExceeded -> Timeout, everything else -> Failed.
[[nodiscard]] PodSetupResult result_of(const Error& e) noexcept;

// Why a pod setup stops before (or instead of) changing the pod's netns.
struct PodSetupStop {
  PodSetupResult result = PodSetupResult::Failed;
  std::string message;
  friend bool operator==(const PodSetupStop&, const PodSetupStop&) = default;
};

// What the shell knows about a sandbox once the runtime answered PodSandboxStatus.
struct SandboxFacts {
  bool wants_smcr = false;  // wants_smcr() of the status's annotations
  SandboxState state = SandboxState::NotReady;
  SandboxNetns netns;               // parse_sandbox_netns() of the status
  bool path_visible = false;        // stat(netns.path) succeeded in the agent's mount namespace
  std::string proc_root = "/proc";  // the host's procfs as the agent sees it
};

// The namespace file to enter, or why not. In order: a pod without the annotation is
// NotRequested; a sandbox that is not ready is SandboxGone; a host-network pod is HostNetwork
// (the host setup covers it); a closed netns is SandboxGone. Then the runtime's netns path when
// the agent can see it, else <proc_root>/<pid>/ns/net; with neither, SandboxGone when a path was
// named (gone, or not mounted into the agent) and Failed when the runtime named nothing.
using NetnsChoice = std::variant<PodSetupStop, std::string>;
[[nodiscard]] NetnsChoice choose_pod_netns(const SandboxFacts& facts);
// choose_pod_netns() without the annotation check (the admin commands look at any pod).
[[nodiscard]] NetnsChoice locate_sandbox_netns(const SandboxFacts& facts);

// What the shell learnt about the chosen namespace before entering it.
struct NetnsTargetFacts {
  std::string netns;                         // the file choose_pod_netns() returned
  Status host_readable;                      // same_netns(host, host): can the host's netns be looked at?
  std::optional<Result<bool>> same_as_host;  // same_netns(netns, host); unset when host_readable failed
  Status entry_valid;                        // building the pod's pnet entry from the config
  bool time_left = true;                     // the deadline has not passed
};

// Whether the agent may enter the namespace: never the host's (HostNetnsRefused), Failed when the
// host's netns cannot be looked at (procRoot is not the host's /proc), SandboxGone when the pod's
// vanished meanwhile, Failed when the config's entry cannot be built, Timeout without time left. nullopt: go ahead.
[[nodiscard]] std::optional<PodSetupStop> refuse_pod_netns(const NetnsTargetFacts& facts);

// The `set` text of a configured pod: "ERDMA eth eth0 added; net.smc.wmem=262144", or, when the
// pod's interface carries its own RDMA device (`own_rdma_device`), why no entry was added.
[[nodiscard]] std::string describe_configured(const std::string& entry, bool entry_added,
                                              const std::vector<std::string>& sysctls_set,
                                              const std::string& own_rdma_device = "");

}  // namespace erdma::agent
