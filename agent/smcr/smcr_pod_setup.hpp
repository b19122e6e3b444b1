// SMC-R pod setup, race-free and node-local. Kubelet calls PreStartContainer (the plugin
// registers with pre_start_required) before a container with eRDMA slots starts; this hook maps
// the slot IDs to the pod (kubelet's PodResources List), finds the pod's sandbox, annotations and
// network namespace (CRI ListPodSandbox + PodSandboxStatus verbose), and when the pod asks for
// SMC-R (annotation exactly "true") and its netns is not the host's, adds `<podInterface> ->
// PNETID` and the configured net.smc.* sysctls inside it. It never fails the container: SMC falls
// back to TCP, so every failure is logged and counted and kubelet gets success, always within the
// deadline. resync() applies the same to every ready SMC-R sandbox of the pods holding the
// resource (after an agent restart). The pod's netns is opened once and that descriptor is
// compared with the host's and entered (netns.hpp: open_netns_once, open_process_netns).
//
// The SMC-R prediction (whether SMC-R can form for the pod: rtnetlink, sysfs and SMC netlink
// reads in the node's and the pod's netns) changes nothing in the pod, so PreStartContainer does
// not wait for it: kubelet gets its answer once the netns is configured, and one worker thread
// makes the prediction afterwards, then logs the setup's one "SMC-R pod setup" line with it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/core/config.hpp"
#include "agent/core/pod_setup.hpp"
#include "agent/core/smcr_feasibility.hpp"
#include "agent/deviceplugin/pre_start_hook.hpp"
#include "agent/kube/pod_events.hpp"
#include "agent/metrics/agent_metrics.hpp"
#include "agent/sys/pod_netns.hpp"
#include "agent/sys/pod_sources.hpp"
#include "common/work_queue.hpp"

namespace erdma::agent {

struct PodSetupOutcome {
  PodSetupResult result = PodSetupResult::Failed;
  std::string pod;      // "ns/name" when known
  std::string pod_uid;  // the pod's metadata.uid, from the runtime's sandbox metadata, when known
  std::string sandbox;  // sandbox ID when known
  std::string netns;    // the namespace file used, when known
  std::string message;  // why, for anything but Configured; what was set for Configured
  // Whether SMC-R can form for the pod (Configured and HostNetwork only).
  std::optional<SmcrPrediction> prediction;
  // The setup's time: at PreStartContainer, until kubelet's answer (the prediction comes after it
  // and is not included); at resync and from set_up(), everything.
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
  NetnsRef netns;  // by path and identity (NetnsRef::by_identity): a namespace reused meanwhile reads as gone
};

struct ResyncSummary {
  size_t sandboxes = 0;  // ready sandboxes the runtime listed for pods holding the resource
  size_t smcr = 0;       // of which ask for SMC-R
  size_t configured = 0;
  size_t failed = 0;  // any result other than Configured, HostNetwork or SandboxGone
};

class SmcrPodSetup final : public PreStartHook {
 public:
  // All references must outlive the hook. `metrics` may be null. `inspector` gathers the facts of
  // the SMC-R prediction (the daemon gives it the kernel's: KernelPodNetworkInspector).
  SmcrPodSetup(const AgentConfig& cfg, PodResourcesSource& pods, SandboxSource& sandboxes,
               PodNetnsConfigurator& configurator, AgentMetrics* metrics, PodNetworkInspector& inspector);
  // Makes or reports every prediction still queued (see wait_for_predictions), then stops.
  ~SmcrPodSetup() override;
  SmcrPodSetup(const SmcrPodSetup&) = delete;
  SmcrPodSetup& operator=(const SmcrPodSetup&) = delete;

  // PreStartHook: always succeeds (see above); the outcome is logged and counted.
  [[nodiscard]] Status pre_start(const std::vector<std::string>& device_ids, const std::vector<std::string>& devices,
                                 std::chrono::steady_clock::time_point deadline) override;
  [[nodiscard]] Status missed_turn(const std::vector<std::string>& device_ids, const std::string& why) override;

  // The same hook for the other resource the agent serves (smcr.resourceName): kubelet's slot IDs
  // are looked up under that resource. It lives as long as this hook.
  [[nodiscard]] PreStartHook& for_resource(const std::string& resource);

  // The pre_start work with its outcome, the prediction made inline (what pre_start logs and counts).
  [[nodiscard]] PodSetupOutcome set_up(const std::vector<std::string>& device_ids, Deadline deadline);
  // The CDI hook's setup of a pod with an SMC-R claim (agent/core/cdi_hook.hpp): the sandbox the
  // runtime named, configured as pre_start configures a device-plugin pod once it is known to be a
  // pod of `claim_namespace` (the claim's) and that namespace is in smcr.allowedNamespaces. The pod
  // needs no annotation: the claim is its request. Logged (trigger "CDI hook"), counted and told
  // in Events like a PreStartContainer setup; the prediction follows in the background.
  [[nodiscard]] PodSetupOutcome set_up_claim_pod(const std::string& sandbox_id, const std::string& claim_namespace,
                                                 Deadline deadline);
  // Also report setups that failed and predictions of a fall-back as Events on the pod. May be
  // set while setups run; `sink` must outlive the hook (or be replaced by null first).
  void set_event_sink(PodEventSink* sink) noexcept { events_.store(sink); }

  // Predictions pre_start queued and not yet logged. Past kMaxQueuedPredictions a setup is logged
  // at once with an `unknown` prediction that says so; at destruction the one being made finishes
  // (bounded by 2 x smcr.callTimeoutMs) and the rest are logged as not predicted. Nothing is lost.
  static constexpr size_t kMaxQueuedPredictions = 1024;
  [[nodiscard]] size_t pending_predictions() const;
  // Waits until every queued prediction is made and logged; false when `timeout` passed first.
  [[nodiscard]] bool wait_for_predictions(std::chrono::milliseconds timeout);
  // A lower bound than kMaxQueuedPredictions (tests).
  void limit_queued_predictions(size_t n);
  // What the destructor does first: the prediction in progress finishes, the queued ones are
  // logged as not predicted, later setups are logged at once as not predicted. Returns when the
  // worker is done; predictions_stopping() turns true as soon as it begins.
  void stop_predictions();
  [[nodiscard]] bool predictions_stopping() const;

  // Configures every ready sandbox that asks for SMC-R of the pods kubelet lists as holding the
  // resource (one filtered runtime list per pod, so no answer grows with the node's other pods).
  // Errors when kubelet cannot be listed or the runtime does not answer (Unavailable,
  // DeadlineExceeded); each sandbox's outcome is logged and counted like a PreStartContainer's.
  [[nodiscard]] Result<ResyncSummary> resync(Deadline deadline);

  // Netns paths the runtime names are opened only under kRuntimeNetnsDirs; tests add theirs.
  void allow_netns_dir_for_test(std::string dir);

  // Pod namespaces configured so far (thread-safe copy), and dropping one that is gone.
  [[nodiscard]] std::vector<TrackedPod> tracked() const;
  void forget(const std::string& sandbox_id);

 private:
  // A prediction left for later: the pod's netns, or none for a host-network pod.
  struct PredictionTarget {
    bool wanted = false;
    std::optional<NetnsRef> pod;
  };
  // With `later` null the prediction is made inline, else only named in `later`.
  // Another resource's view of this hook (for_resource).
  class ResourceHook final : public PreStartHook {
   public:
    ResourceHook(SmcrPodSetup& setup, std::string resource) : setup_(setup), resource_(std::move(resource)) {}
    [[nodiscard]] Status pre_start(const std::vector<std::string>& device_ids, const std::vector<std::string>& devices,
                                   std::chrono::steady_clock::time_point deadline) override {
      return setup_.pre_start_of(resource_, device_ids, devices, deadline);
    }
    [[nodiscard]] Status missed_turn(const std::vector<std::string>& device_ids, const std::string& why) override {
      return setup_.missed_turn(device_ids, why);
    }

   private:
    SmcrPodSetup& setup_;
    std::string resource_;
  };

  [[nodiscard]] Status pre_start_of(const std::string& resource, const std::vector<std::string>& device_ids,
                                    const std::vector<std::string>& devices,
                                    std::chrono::steady_clock::time_point deadline);
  // The outcome for a pod of a namespace smcr.allowedNamespaces leaves out.
  [[nodiscard]] PodSetupOutcome not_allowed(PodSetupOutcome out, const std::string& namespace_) const;
  // `resource`: the resource whose slot IDs kubelet passed.
  PodSetupOutcome run_setup(const std::string& resource, const std::vector<std::string>& device_ids, Deadline deadline,
                            PredictionTarget* later);
  // `require_namespace` (not empty): a claim's pod, set up without the annotation (the claim is its
  // request); a sandbox of a pod of another namespace is refused.
  PodSetupOutcome configure_sandbox(const std::string& sandbox_id, Deadline deadline, PodSetupOutcome out,
                                    PredictionTarget* later, std::string_view require_namespace = {});
  void predict_into(PodSetupOutcome& out, const std::optional<NetnsRef>& pod, Deadline deadline,
                    PredictionTarget* later);
  // Logs the outcome's line and counts its prediction; counts its result too when `count_result`.
  void report(const char* trigger, const PodSetupOutcome& outcome, bool count_result = true);
  // Never fails: facts that cannot be gathered make an `unknown` prediction.
  SmcrPrediction predict(const std::optional<NetnsRef>& pod, Deadline deadline);
  void queue_prediction(PodSetupOutcome outcome, std::optional<NetnsRef> pod, const char* trigger);
  struct QueuedPrediction {
    PodSetupOutcome outcome;
    std::optional<NetnsRef> pod;
    const char* trigger = "PreStartContainer";  // what the log line names: a string literal
  };
  void make_prediction(QueuedPrediction&& job, bool stopping);

  std::mutex resource_hooks_mu_;
  std::map<std::string, std::unique_ptr<ResourceHook>> resource_hooks_;
  const AgentConfig& cfg_;
  PodResourcesSource& pods_;
  SandboxSource& sandboxes_;
  PodNetnsConfigurator& configurator_;
  AgentMetrics* metrics_;
  std::atomic<PodEventSink*> events_{nullptr};
  PodNetworkInspector& inspector_;

  std::vector<std::string> netns_dirs_ = kRuntimeNetnsDirs;

  mutable std::mutex mu_;
  std::map<std::string, TrackedPod> tracked_;  // by sandbox ID

  std::atomic<size_t> queue_limit_{kMaxQueuedPredictions};  // for the refusal's message
  common::WorkQueue<QueuedPrediction> predictions_;         // last: its worker uses the members above
};

}  // namespace erdma::agent
