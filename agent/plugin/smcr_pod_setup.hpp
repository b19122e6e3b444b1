// SMC-R pod setup, race-free and node-local. Kubelet calls PreStartContainer (the plugin
// registers with pre_start_required) before a container with eRDMA slots starts; this hook maps
// the slot IDs to the pod (kubelet's PodResources List), finds the pod's sandbox, annotations and
// network namespace (CRI ListPodSandbox + PodSandboxStatus verbose), and when the pod asks for
// SMC-R (annotation exactly "true") and its netns is not the host's, adds `<podInterface> ->
// PNETID` and the configured net.smc.* sysctls inside it. It never fails the container: SMC falls
// back to TCP, so every failure is logged and counted and kubelet gets success, always within the
// deadline. resync() applies the same to every ready SMC-R sandbox (after an agent restart).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/core/config.hpp"
#include "agent/core/pod_setup.hpp"
#include "agent/core/smcr_feasibility.hpp"
#include "agent/plugin/agent_metrics.hpp"
#include "agent/plugin/pre_start_hook.hpp"
#include "agent/sys/pod_netns.hpp"
#include "agent/sys/pod_sources.hpp"

namespace erdma::agent {

struct PodSetupOutcome {
  PodSetupResult result = PodSetupResult::Failed;
  std::string pod;      // "ns/name" when known
  std::string sandbox;  // sandbox ID when known
  std::string netns;    // the namespace file used, when known
  std::string message;  // why, for anything but Configured; what was set for Configured
  // Whether SMC-R can form for the pod (Configured and HostNetwork only).
  std::optional<SmcrPrediction> prediction;
  std::chrono::microseconds duration{0};
  // Where the time went, per step (zero for a step that did not run); logged beside "us" so a
  // slow setup says which answer or which kernel work it waited for.
  struct Steps {
    std::chrono::microseconds pod_resources{0};  // kubelet's PodResources List
    std::chrono::microseconds runtime{0};        // CRI ListPodSandbox and PodSandboxStatus
    std::chrono::microseconds netns{0};          // pnet entry and sysctls inside the pod's netns
    std::chrono::microseconds prediction{0};     // the SMC-R prediction's rtnetlink and sysfs reads
  } steps;
};

// A pod netns the agent configured (for the kernel statistics it holds).
struct TrackedPod {
  std::string sandbox;
  std::string pod;
  NetnsRef netns;
};

struct ResyncSummary {
  size_t sandboxes = 0;  // ready sandboxes the runtime listed
  size_t smcr = 0;       // of which ask for SMC-R
  size_t configured = 0;
  size_t failed = 0;     // any result other than Configured, HostNetwork or SandboxGone
};

class SmcrPodSetup final : public PreStartHook {
 public:
  // All references must outlive the hook. `metrics` may be null. `inspector` gathers the facts of
  // the SMC-R prediction; null means the kernel's (KernelPodNetworkInspector over setns, sysfs
  // under /sys and netlink, the node's netns at <procRoot>/1/ns/net).
  SmcrPodSetup(const AgentConfig& cfg, PodResourcesSource& pods, SandboxSource& sandboxes,
               PodNetnsConfigurator& configurator, AgentMetrics* metrics, PodNetworkInspector* inspector = nullptr);

  // PreStartHook: always succeeds (see above); the outcome is logged and counted.
  [[nodiscard]] Status pre_start(const std::vector<std::string>& device_ids, const std::vector<std::string>& devices,
                                 std::chrono::steady_clock::time_point deadline) override;
  [[nodiscard]] Status missed_turn(const std::vector<std::string>& device_ids) override;

  // The pre_start work with its outcome (what pre_start logs and counts).
  [[nodiscard]] PodSetupOutcome set_up(const std::vector<std::string>& device_ids, Deadline deadline);

  // Configures every ready sandbox that asks for SMC-R. Errors only when the runtime cannot be
  // listed; each sandbox's outcome is logged and counted like a PreStartContainer's.
  [[nodiscard]] Result<ResyncSummary> resync(Deadline deadline);

  // Pod namespaces configured so far (thread-safe copy), and dropping one that is gone.
  [[nodiscard]] std::vector<TrackedPod> tracked() const;
  void forget(const std::string& sandbox_id);

 private:
  PodSetupOutcome configure_sandbox(const std::string& sandbox_id, Deadline deadline, PodSetupOutcome out);
  void report(const char* trigger, const PodSetupOutcome& outcome);
  // Never fails: facts that cannot be gathered make an `unknown` prediction.
  SmcrPrediction predict(const std::optional<NetnsRef>& pod, Deadline deadline);

  const AgentConfig& cfg_;
  PodResourcesSource& pods_;
  SandboxSource& sandboxes_;
  PodNetnsConfigurator& configurator_;
  AgentMetrics* metrics_;
  std::unique_ptr<Netns> own_netns_;                    // only for the default inspector
  std::unique_ptr<PodNetworkInspector> own_inspector_;  // the default inspector
  PodNetworkInspector* inspector_;

  mutable std::mutex mu_;
  std::map<std::string, TrackedPod> tracked_;  // by sandbox ID
};

}  // namespace erdma::agent
